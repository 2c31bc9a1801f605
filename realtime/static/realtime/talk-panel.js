// The "talk to an agent" panel of the demo page and of the dashboard's agent page: a Start/Stop button,
// the call id, a microphone meter, a speaking indicator, the agent's words as it speaks them, the
// transcripts, and tool calls (with the reason of a failed one). The session URL comes from the page's
// own backend (POST with the CSRF token); the panel never sees an API key.
import { VoiceClient } from "../voice-client/v1/voice-client.js";

const LABELS = {
  idle: ["Start conversation", "Ready. Press Start and allow the microphone."],
  connecting: ["Connecting…", "Connecting: microphone and session…"],
  live: ["Stop", "Live: speak now."],
  stopping: ["Stopping…", "Ending the call…"],
  closed: ["Start again", "Call ended."],
};

/**
 * root: the panel element (see realtime/templates/realtime/talk_panel.html).
 * sessionUrl(): the page's endpoint that answers {websocketUrl} (or {error}); null when nothing is chosen.
 * callUrl(callId): a link for the call id, or null.
 */
export function mountTalkPanel(root, { sessionUrl, callUrl = () => null }) {
  const $ = (role) => root.querySelector(`[data-role="${role}"]`);
  const button = $("toggle");
  const status = $("status");
  const call = $("call");
  const meter = $("level");
  const speaking = $("speaking");
  const log = $("log");
  const csrf = root.querySelector("[name=csrfmiddlewaretoken]").value;
  // What tests (and curious developers) can read: the client, and each barge-in's queue before/after.
  const talk = { client: null, clears: [], lastQueued: 0, maxLevel: 0, captions: [] };
  root.talk = talk;
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

  function toolLine({ name, phase, status, error }) {
    if (phase === "finished" && status && status !== "success") {
      const what = status === "timeout" ? "timed out" : "failed";
      line("tool talk-failed", "Tool", `${name} ${what}${error ? `: ${error}` : ""}`);
    } else {
      line("tool", "Tool", `${name} ${phase}`);
    }
  }

  function show(state, detail) {
    root.dataset.state = state;
    const [buttonText, statusText] = LABELS[state];
    button.textContent = buttonText;
    button.disabled = state === "connecting" || state === "stopping";
    button.classList.toggle("talk-stop", state === "live");
    status.textContent = detail || statusText;
  }

  async function fetchUrl(url) {
    const response = await fetch(url, { method: "POST", headers: { "X-CSRFToken": csrf }, credentials: "same-origin" });
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
    return body.websocketUrl;
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
    live = unheard = null;
    setSpeaking(false);
    const client = new VoiceClient();
    talk.client = client;
    client.on("state", ({ state }) => {
      if (state !== "closed") show(state);
    });
    client.on("started", ({ callId }) => {
      root.dataset.callId = callId;
      const href = callUrl(callId);
      const target = href ? Object.assign(document.createElement("a"), { href }) : document.createElement("code");
      target.textContent = callId;
      call.replaceChildren(document.createTextNode("Call "), target);
    });
    client.on("transcript", ({ role, text }) => {
      if (role === "assistant") agentTranscript(text);
      // A caller's words recognized while the agent already answers them go above that answer.
      else line(role, "You:", text, live ? live.item : null);
    });
    client.on("speech", caption);
    client.on("tool", toolLine);
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
    const websocketUrl = fetchUrl(url);
    websocketUrl.catch(() => {}); // reported through the client's error event
    client.connect(websocketUrl);
  }

  button.addEventListener("click", () => {
    const client = talk.client;
    if (client && (client.state === "live" || client.state === "connecting")) client.stop();
    else start();
  });
  show("idle");
  setSpeaking(false);
  return talk;
}
