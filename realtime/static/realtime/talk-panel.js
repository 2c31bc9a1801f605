// The "talk to an agent" panel of the demo page and of the dashboard's agent page: a Start/Stop button,
// the call id, a microphone meter, live transcripts and tool calls. The session URL comes from the
// page's own backend (POST with the CSRF token); the panel never sees an API key.
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
  const log = $("log");
  const csrf = root.querySelector("[name=csrfmiddlewaretoken]").value;
  // What tests (and curious developers) can read: the client, and each barge-in's queue before/after.
  const talk = { client: null, clears: [], lastQueued: 0, maxLevel: 0 };
  root.talk = talk;

  function line(kind, label, text) {
    const item = document.createElement("li");
    item.className = `talk-${kind}`;
    const who = document.createElement("strong");
    who.textContent = label;
    item.append(who, document.createTextNode(` ${text}`));
    log.append(item);
    log.scrollTop = log.scrollHeight;
    return item;
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
    client.on("transcript", ({ role, text }) => line(role, role === "user" ? "You:" : "Agent:", text));
    client.on("tool", ({ name, phase }) => line("tool", "Tool", `${name} ${phase}`));
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
    client.on("level", ({ rms }) => {
      talk.maxLevel = Math.max(talk.maxLevel, rms);
      // -60..0 dBFS across the bar.
      const db = rms > 0 ? 20 * Math.log10(rms) : -100;
      meter.style.width = `${Math.max(0, Math.min(100, ((db + 60) / 60) * 100))}%`;
    });
    client.on("closed", ({ code, reason }) => {
      meter.style.width = "0%";
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
  return talk;
}
