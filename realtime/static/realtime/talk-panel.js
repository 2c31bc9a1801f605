// The "talk to an agent" panel of the demo page and of the dashboard's agent page: a Start/Stop button,
// a "Typed only" switch (a text session: no microphone, no audio), a text box for typed turns (in both
// kinds of session), the call id, a microphone meter, a speaking indicator, the agent's words as it
// speaks them, the transcripts, and tool calls with their arguments and results (with the reason of a
// failed one). The session comes from the page's own backend (POST with the CSRF token, asking for the
// modality, the tool events and, in a browser that has it, WebRTC); the panel never sees an API key.
import { MAX_TEXT_CHARS, VoiceClient, supportsWebRTC } from "../voice-client/v1/voice-client.js";

const LABELS = {
  idle: ["Start conversation", "Ready. Press Start and allow the microphone, or type only."],
  connecting: ["Connecting…", "Connecting: microphone and session…"],
  live: ["Stop", "Live: speak now, or type."],
  stopping: ["Stopping…", "Ending the call…"],
  closed: ["Start again", "Call ended."],
};
// A typed-only session's statuses where they differ.
const TEXT_LABELS = {
  connecting: "Connecting…",
  live: "Live: type a message.",
};
const SHOWN_CHARS = 160; // a tool's arguments or result beyond this are cut in the log (whole in its title)

/** A text as compared with its transcript: spacing does not count. */
function sameWords(text) {
  return text.trim().replace(/\s+/g, " ");
}

/** A tool's arguments or result as one short line of text, and the whole of it. */
function brief(value) {
  let whole;
  try {
    whole = typeof value === "string" ? value : JSON.stringify(value);
  } catch {
    whole = String(value);
  }
  whole = whole ?? String(value);
  return [whole.length > SHOWN_CHARS ? `${whole.slice(0, SHOWN_CHARS - 1)}…` : whole, whole];
}

/**
 * root: the panel element (see realtime/templates/realtime/talk_panel.html).
 * sessionUrl(): the page's endpoint that answers {websocketUrl, webrtc?} (or {error}); null when nothing is
 *   chosen.
 * callUrl(callId): a link for the call id, or null.
 * transport: "auto" (WebRTC in a browser that has it, else the socket) or "websocket" (the socket only);
 *   the pages take it from their address (?transport=websocket).
 */
export function mountTalkPanel(root, { sessionUrl, callUrl = () => null, transport = "auto" }) {
  const $ = (role) => root.querySelector(`[data-role="${role}"]`);
  const button = $("toggle");
  const status = $("status");
  const call = $("call");
  const meter = $("level");
  const speaking = $("speaking");
  const log = $("log");
  const typedOnly = $("typed-only");
  const textBox = $("text");
  const send = $("send");
  const csrf = root.querySelector("[name=csrfmiddlewaretoken]").value;
  textBox.maxLength = MAX_TEXT_CHARS;
  // What tests (and curious developers) can read: the client, each barge-in's queue before/after, the
  // turns typed, and the tool events (tool.call / tool.result) as they came.
  const talk = {
    client: null,
    transport: null,
    fallback: null,
    clears: [],
    lastQueued: 0,
    maxLevel: 0,
    captions: [],
    typed: [],
    toolEvents: [],
  };
  root.talk = talk;
  let modality = "audio";
  // Typed turns shown at once, until the server's `user` transcript of the same words confirms them.
  let pendingTyped = [];
  // Each tool call has a "started" line (its arguments once tool.call arrives) and a "finished" line (its
  // result and duration once tool.result arrives). The phase messages (tool.started/tool.finished) and
  // the detail ones (tool.call/tool.result) may come in either order: each fills the oldest line of its
  // tool that still lacks it, else opens a line.
  let toolLines = { started: [], finished: [] };
  // The agent's answer as it speaks it: one log line that grows sentence by sentence and becomes the
  // answer's transcript line when that arrives (with only the words heard, after a barge-in).
  let live = null; // {item, words}: the line of the answer being spoken
  let unheard = null; // the line of an answer that stopped, until its transcript replaces it

  function line(kind, label, text, before = null) {
    const item = document.createElement("li");
    item.className = `talk-${kind}`;
    const who = document.createElement("strong");
    who.textContent = label;
    item.append(who, document.createTextNode(` ${text}`));
    log.insertBefore(item, before);
    log.scrollTop = log.scrollHeight;
    return item;
  }

  function setSpeaking(on) {
    root.dataset.speaking = on ? "true" : "false";
    speaking.hidden = !on;
  }

  function caption({ speaking: on, text, interrupted }) {
    if (on) {
      talk.captions.push(text);
      if (!live) {
        unheard = null;
        const item = line("assistant talk-live", "Agent:", "");
        const words = document.createElement("span");
        words.dataset.role = "caption";
        item.append(words);
        live = { item, words };
      }
      live.words.textContent = live.words.textContent ? `${live.words.textContent} ${text}` : text;
      log.scrollTop = log.scrollHeight;
    } else if (live) {
      live.item.classList.remove("talk-live");
      if (interrupted) live.item.classList.add("talk-cut");
      unheard = live.item;
      live = null;
    }
    setSpeaking(on);
  }

  function agentTranscript(text) {
    const item = live ? live.item : unheard;
    if (!item) {
      line("assistant", "Agent:", text);
      return;
    }
    item.replaceChildren(Object.assign(document.createElement("strong"), { textContent: "Agent:" }));
    item.append(document.createTextNode(` ${text}`));
    item.className = "talk-assistant";
    if (live) live = null;
    unheard = null;
  }

  function toolEntry(phase, name, part) {
    const queue = toolLines[phase];
    let entry = queue.find((candidate) => candidate.name === name && !candidate[part]);
    if (!entry) {
      entry = { name, item: line("tool", "Tool", "") };
      queue.push(entry);
    }
    entry[part] = true;
    if (entry.phase && entry.detail) queue.splice(queue.indexOf(entry), 1);
    return entry;
  }

  function toolText(item, kind, text, title = "") {
    item.className = `talk-${kind}`;
    item.replaceChildren(Object.assign(document.createElement("strong"), { textContent: "Tool" }));
    item.append(document.createTextNode(` ${text}`));
    if (title) item.title = title;
    else item.removeAttribute("title");
  }

  function renderStarted(entry) {
    if (entry.arguments === undefined) return toolText(entry.item, "tool", `${entry.name} started`);
    const [shown, whole] = brief(entry.arguments);
    toolText(entry.item, "tool", `${entry.name} started with ${shown}`, whole);
  }

  function renderFinished(entry) {
    const status = entry.status || null;
    const took = entry.durationMs != null ? ` in ${entry.durationMs} ms` : "";
    const [shown, whole] = entry.result !== undefined ? brief(entry.result) : ["", ""];
    if (status && status !== "success") {
      const what = status === "timeout" ? "timed out" : "failed";
      const reason = entry.error || shown;
      toolText(entry.item, "tool talk-failed", `${entry.name} ${what}${took}${reason ? `: ${reason}` : ""}`, whole);
    } else {
      toolText(entry.item, "tool", `${entry.name} finished${took}${shown ? `: ${shown}` : ""}`, whole);
    }
  }

  function toolLine({ name, phase, status, error }) {
    const entry = toolEntry(phase, name, "phase");
    if (phase === "finished") {
      entry.status = status || entry.status;
      entry.error = error || entry.error;
      renderFinished(entry);
    } else {
      renderStarted(entry);
    }
  }

  function toolCall(event) {
    talk.toolEvents.push({ type: "tool.call", ...event });
    const entry = toolEntry("started", event.name, "detail");
    entry.arguments = event.arguments;
    renderStarted(entry);
  }

  function toolResult(event) {
    talk.toolEvents.push({ type: "tool.result", ...event });
    const entry = toolEntry("finished", event.name, "detail");
    entry.status = entry.status || event.status;
    entry.result = event.result;
    entry.durationMs = event.durationMs;
    renderFinished(entry);
  }

  function userTranscript(text) {
    // A typed turn coming back: its line, shown when it was sent, is confirmed rather than repeated.
    const words = sameWords(text);
    const typed = pendingTyped.find((pending) => sameWords(pending.text) === words);
    if (typed) {
      typed.item.classList.remove("talk-pending");
      pendingTyped = pendingTyped.filter((pending) => pending !== typed);
      return;
    }
    // A caller's words recognized while the agent already answers them go above that answer.
    line("user", "You:", text, live ? live.item : null);
  }

  function sendTyped() {
    const client = talk.client;
    const text = textBox.value.trim();
    if (!client || !text) return;
    let sent = false;
    try {
      sent = client.sendText(text);
    } catch (error) {
      line("error", "Error:", error.message);
      return;
    }
    if (!sent) return;
    talk.typed.push(text);
    // Sent while the agent speaks, the turn interrupts it: it goes below what was said so far.
    pendingTyped.push({ text, item: line("user talk-typed talk-pending", "You (typed):", text) });
    textBox.value = "";
    textBox.focus();
  }

  function show(state, detail) {
    root.dataset.state = state;
    const [buttonText, statusText] = LABELS[state];
    button.textContent = buttonText;
    button.disabled = state === "connecting" || state === "stopping";
    button.classList.toggle("talk-stop", state === "live");
    status.textContent = detail || (modality === "text" && TEXT_LABELS[state]) || statusText;
    const isLive = state === "live";
    textBox.disabled = !isLive;
    send.disabled = !isLive;
    typedOnly.disabled = state === "connecting" || state === "live" || state === "stopping";
  }

  async function fetchSession(url, chosen) {
    // The session's modality, tool.call / tool.result messages for the log, and WebRTC for a voice session
    // in a browser that has it (the client falls back to the socket otherwise).
    const asked = { modality: chosen, events: ["tool"] };
    if (chosen === "audio" && transport !== "websocket" && supportsWebRTC()) asked.transport = "webrtc";
    const response = await fetch(url, {
      method: "POST",
      headers: { "X-CSRFToken": csrf, "Content-Type": "application/json" },
      body: JSON.stringify(asked),
      credentials: "same-origin",
    });
    let body = {};
    try {
      body = await response.json();
    } catch {
      body = {};
    }
    if (!response.ok || !body.websocketUrl) {
      throw Object.assign(new Error(body.error || `The session could not be opened (HTTP ${response.status})`), {
        code: "session",
      });
    }
    return body;
  }

  function start() {
    const url = sessionUrl();
    if (!url) {
      status.textContent = "Choose an active agent first.";
      return;
    }
    log.replaceChildren();
    call.replaceChildren();
    talk.clears = [];
    talk.maxLevel = 0;
    talk.captions = [];
    talk.typed = [];
    talk.toolEvents = [];
    talk.transport = talk.fallback = null;
    delete root.dataset.transport;
    live = unheard = null;
    pendingTyped = [];
    toolLines = { started: [], finished: [] };
    setSpeaking(false);
    modality = typedOnly.checked ? "text" : "audio";
    root.dataset.modality = modality;
    const client = new VoiceClient({ modality, transport: transport === "websocket" ? "websocket" : "auto" });
    talk.client = client;
    client.on("state", ({ state }) => {
      if (state !== "closed") show(state);
      if (state === "live" && modality === "text") textBox.focus();
    });
    client.on("transport", ({ transport, fallback }) => {
      talk.transport = root.dataset.transport = transport;
      talk.fallback = fallback;
    });
    client.on("started", ({ callId }) => {
      root.dataset.callId = callId;
      const href = callUrl(callId);
      const target = href ? Object.assign(document.createElement("a"), { href }) : document.createElement("code");
      target.textContent = callId;
      const over = talk.transport === "webrtc" ? " over WebRTC" : " over the WebSocket";
      call.replaceChildren(document.createTextNode("Call "), target, document.createTextNode(over));
      if (talk.fallback) call.title = `WebRTC was not used: ${talk.fallback}`;
      else call.removeAttribute("title");
    });
    client.on("transcript", ({ role, text }) => {
      if (role === "assistant") agentTranscript(text);
      else userTranscript(text);
    });
    client.on("speech", caption);
    client.on("tool", toolLine);
    client.on("tool.call", toolCall);
    client.on("tool.result", toolResult);
    client.on("transfer", ({ phoneNumber }) => line("transfer", "Transfer", `to ${phoneNumber}`));
    client.on("queue", ({ queuedSamples }) => {
      talk.lastQueued = queuedSamples;
    });
    client.on("clear", ({ droppedSamples, queuedSamples, sampleRate }) => {
      talk.clears.push({ queuedBefore: talk.lastQueued, droppedSamples, queuedAfter: client.queuedSamples() });
      talk.lastQueued = queuedSamples;
      const ms = sampleRate ? Math.round((droppedSamples * 1000) / sampleRate) : 0;
      line("clear", "Interrupted:", `agent audio stopped (${ms} ms dropped)`);
    });
    client.on("error", ({ code, message }) => {
      line("error", "Error:", `${message} (${code})`);
    });
    client.on("level", ({ rms, meter: fill }) => {
      talk.maxLevel = Math.max(talk.maxLevel, rms);
      meter.style.width = `${Math.round(fill * 100)}%`; // -60..0 dBFS across the bar
      meter.parentElement.setAttribute("aria-valuenow", String(Math.round(fill * 100)));
    });
    client.on("closed", ({ code, reason }) => {
      meter.style.width = "0%";
      meter.parentElement.setAttribute("aria-valuenow", "0");
      const why = reason ? `: ${reason}` : "";
      show("closed", client.callId ? `Call ended (close code ${code}${why}).` : `Could not start${why}.`);
    });
    const session = fetchSession(url, modality);
    session.catch(() => {}); // reported through the client's error event
    client.connect(session);
  }

  button.addEventListener("click", () => {
    const client = talk.client;
    if (client && (client.state === "live" || client.state === "connecting")) client.stop();
    else start();
  });
  send.addEventListener("click", sendTyped);
  // Enter sends. The dashboard's panel sits inside the agent's change form: Enter must not submit it.
  textBox.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing) return;
    event.preventDefault();
    sendTyped();
  });
  show("idle");
  setSpeaking(false);
  return talk;
}
