// The embeddable voice widget of the voice agent service (docs/widget.md). One line in any page:
//
//   <script src="https://voice.example.com/static/widget/v1/widget.js" data-key="pk_..." async></script>
//
// It draws a call button and a small panel (start and end the call, mute, live captions, a text box for
// typed turns) in a shadow root, so the page's CSS does not reach it, and talks to the agent through the
// service's browser client (/static/voice-client/v1/voice-client.js: WebRTC when the browser has it, else
// the WebSocket). The session comes from POST /public/v1/widget/sessions with the publishable key, from
// this page's origin, which the key must list. No API key is ever in the page.
//
// Styling: data-position ("bottom-right", "bottom-left", "inline"), data-color, data-text-color,
// data-label, data-title, data-open; or CSS variables on the page (--voice-widget-color, ...) and
// ::part(launcher), ::part(panel) ... on [data-voice-widget]. Nothing here is an inline script or a style
// attribute: the styles are a constructed stylesheet, the colours set through the CSSOM, so a page's
// Content-Security-Policy without 'unsafe-inline' lets it run.
(() => {
  const script = document.currentScript;
  if (!script || !script.src) {
    console.error("voice widget: load widget.js with a <script src=...> tag (not as a module)");
    return;
  }
  const options = script.dataset;
  const key = (options.key || "").trim();
  // The service is where this script came from (data-api when it is served from elsewhere, e.g. a CDN).
  const API = (options.api || new URL(script.src).origin).replace(/\/+$/, "");
  const CLIENT_URL = new URL("../../voice-client/v1/voice-client.js", script.src).href;
  const MODALITY = options.modality === "text" ? "text" : "audio";
  const TRANSPORT = options.transport === "websocket" ? "websocket" : "auto";
  const POSITIONS = ["bottom-right", "bottom-left", "inline"];
  const POSITION = POSITIONS.includes(options.position) ? options.position : "bottom-right";
  const LABEL = options.label || (MODALITY === "text" ? "Chat with us" : "Talk to us");
  const TITLE = options.title || (MODALITY === "text" ? "Chat assistant" : "Voice assistant");
  const MAX_LINES = 60;

  const STYLE = `
:host { all: initial; display: block; }
:host([data-position="inline"]) { display: inline-block; }
[hidden] { display: none !important; }
.vw {
  --_color: var(--voice-widget-color, var(--vw-data-color, #1f5fbf));
  --_on-color: var(--voice-widget-text-color, var(--vw-data-text-color, #ffffff));
  --_background: var(--voice-widget-background, #ffffff);
  --_foreground: var(--voice-widget-foreground, #1d2733);
  --_muted: var(--voice-widget-muted-color, #5b6876);
  --_radius: var(--voice-widget-radius, 14px);
  --_offset: var(--voice-widget-offset, 20px);
  font: 15px/1.45 var(--voice-widget-font, system-ui, -apple-system, "Segoe UI", Roboto, sans-serif);
  color: var(--_foreground);
  position: fixed; bottom: var(--_offset); right: var(--_offset);
  z-index: var(--voice-widget-z-index, 2147483000);
  display: flex; flex-direction: column-reverse; align-items: flex-end; gap: 10px;
  box-sizing: border-box;
}
.vw *, .vw *::before, .vw *::after { box-sizing: border-box; }
.vw[data-position="bottom-left"] { right: auto; left: var(--_offset); align-items: flex-start; }
.vw[data-position="inline"] { position: static; flex-direction: column; align-items: flex-start; }
button, input { font: inherit; color: inherit; }
button { cursor: pointer; }
button:disabled { cursor: not-allowed; opacity: .55; }
:focus-visible { outline: 3px solid var(--_color); outline-offset: 2px; }
.launcher {
  display: inline-flex; align-items: center; gap: 8px; border: 0;
  border-radius: 999px; padding: 12px 18px; background: var(--_color); color: var(--_on-color);
  font-weight: 600; box-shadow: 0 6px 20px rgba(16, 24, 40, .22);
}
.launcher svg { width: 20px; height: 20px; fill: currentColor; flex: none; }
.launcher:focus-visible { outline-color: var(--_foreground); }
.vw[data-state="live"] .launcher .dot { display: inline-block; }
.dot { display: none; width: 9px; height: 9px; border-radius: 50%; background: #3ddc84; }
.panel {
  width: var(--voice-widget-width, min(360px, calc(100vw - 2 * var(--_offset))));
  max-height: min(560px, calc(100vh - 100px)); display: flex; flex-direction: column;
  background: var(--_background); color: var(--_foreground); border-radius: var(--_radius);
  box-shadow: 0 12px 40px rgba(16, 24, 40, .28); overflow: hidden; border: 1px solid rgba(16, 24, 40, .08);
}
.head {
  display: flex; align-items: center; gap: 8px; padding: 12px 14px;
  background: var(--_color); color: var(--_on-color);
}
.title { flex: 1; margin: 0; font-size: 16px; font-weight: 650; }
.close {
  border: 0; background: transparent; color: inherit; width: 32px; height: 32px; border-radius: 8px;
  font-size: 22px; line-height: 1;
}
.close:hover { background: rgba(255, 255, 255, .18); }
.close:focus-visible { outline-color: var(--_on-color); outline-offset: -3px; }
.body { display: flex; flex-direction: column; gap: 10px; padding: 12px 14px 14px; min-height: 0; }
.status { margin: 0; color: var(--_muted); font-size: 14px; }
.error { margin: 0; padding: 8px 10px; border-radius: 8px; background: #fdecea; color: #8a1c14; font-size: 14px; }
.controls { display: flex; gap: 8px; }
.call, .mute, .send {
  border-radius: 10px; padding: 9px 14px; border: 1px solid transparent; font-weight: 600;
}
.call { flex: 1; background: var(--_color); color: var(--_on-color); }
.call[data-live="true"] { background: #b3261e; color: #fff; }
.mute, .send { background: transparent; border-color: rgba(16, 24, 40, .25); }
.mute[aria-pressed="true"] { background: #fff4d6; border-color: #b58100; }
.captions {
  list-style: none; margin: 0; padding: 8px 10px; min-height: 64px; max-height: 260px; overflow-y: auto;
  background: rgba(16, 24, 40, .04); border-radius: 10px; font-size: 14px;
}
.captions:empty::before { content: attr(data-empty); color: var(--_muted); }
.captions li { margin: 4px 0; }
.captions .who { font-weight: 650; margin-right: 4px; }
.captions .agent .who { color: var(--_color); }
.captions .speaking .words { background: rgba(31, 95, 191, .1); border-radius: 4px; }
.captions .pending { opacity: .6; }
.say { display: flex; gap: 8px; margin: 0; }
.say input {
  flex: 1; min-width: 0; padding: 9px 10px; border-radius: 10px; border: 1px solid rgba(16, 24, 40, .25);
  background: var(--_background);
}
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
@media (prefers-reduced-motion: no-preference) {
  .vw[data-state="live"] .dot { animation: vw-pulse 1.4s ease-in-out infinite; }
  @keyframes vw-pulse { 50% { opacity: .35; } }
}
`;

  /** An element with attributes (a property when the name is one: textContent, hidden...) and children. */
  function h(tag, attributes = {}, ...children) {
    const element = tag.startsWith("svg:")
      ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
      : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "textContent" || name === "hidden" || name === "disabled" || name === "type") element[name] = value;
      else element.setAttribute(name, value === true ? "" : String(value));
    }
    element.append(...children);
    return element;
  }

  function microphoneIcon() {
    const path = h("svg:path", {
      d:
        "M12 14a3 3 0 0 0 3-3V5a3 3 0 0 0-6 0v6a3 3 0 0 0 3 3Zm5-3a5 5 0 0 1-10 0H5a7 7 0 0 0 6 6.92V21h2v-3.08" +
        "A7 7 0 0 0 19 11h-2Z",
    });
    return h("svg:svg", { viewBox: "0 0 24 24", "aria-hidden": "true", focusable: "false" }, path);
  }

  function adopt(root) {
    try {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(STYLE);
      root.adoptedStyleSheets = [sheet];
    } catch {
      root.append(h("style", { textContent: STYLE })); // an older browser: a page CSP may refuse it
    }
  }

  /** Why a session was refused, in words for the visitor (and a code for the page and the tests). */
  function refusal(status, body, retryAfter) {
    const code = body && body.code;
    if (status === 403) return ["origin", originMessage()];
    if (status === 401) return ["key", "This widget's key is not valid (it may have been deleted)."];
    if (status === 402) return ["budget", "This assistant is not available right now. Please try again later."];
    if (status === 429 && code === "CONCURRENT_CALL_LIMIT_EXCEEDED") {
      return ["busy", "All lines are busy right now. Please try again in a moment."];
    }
    if (status === 429) {
      const wait = Number(retryAfter || (body && body.retryAfter)) || 0;
      return ["rate", `Too many calls were started just now. Please try again${wait ? ` in ${wait} s` : " shortly"}.`];
    }
    if (status === 409) return ["unavailable", "This assistant is not available right now."];
    return ["unavailable", `The assistant could not be reached (HTTP ${status}). Please try again later.`];
  }

  function originMessage() {
    return (
      `This assistant is not enabled on this website (${location.origin}). ` +
      "If you run this site, add its address to the widget key's allowed origins."
    );
  }

  /**
   * The session for the key: the service's answer, or an Error with `widgetCode` and a visitor's message.
   * Sent as text/plain (the same JSON): no CORS preflight, one round trip less before the call. A refusal
   * the browser does not let the page read (an origin the key does not list gets no CORS header) is told
   * from an unreachable service by fetching this script again (the service serves it to any origin).
   */
  async function requestSession(transport) {
    const body = { key, modality: MODALITY };
    if (transport) body.transport = transport;
    let response;
    try {
      response = await fetch(`${API}/public/v1/widget/sessions`, {
        method: "POST",
        mode: "cors",
        credentials: "omit",
        headers: { "Content-Type": "text/plain;charset=UTF-8" },
        body: JSON.stringify(body),
      });
    } catch {
      const probe = { method: "HEAD", mode: "cors", cache: "no-store", credentials: "omit" };
      const reachable = await fetch(script.src, probe)
        .then((answer) => answer.ok)
        .catch(() => false);
      const message = reachable ? originMessage() : "The voice service cannot be reached. Please try again later.";
      throw Object.assign(new Error(message), { code: "session", widgetCode: reachable ? "origin" : "network" });
    }
    let answer = null;
    try {
      answer = await response.json();
    } catch {
      answer = null;
    }
    if (!response.ok || !answer || !answer.websocketUrl) {
      const [widgetCode, message] = refusal(response.status, answer, response.headers.get("Retry-After"));
      throw Object.assign(new Error(message), { code: "session", widgetCode, status: response.status });
    }
    return answer;
  }

  function mount() {
    const host = h("div", { "data-voice-widget": "", "data-state": "idle", "data-position": POSITION });
    const root = host.attachShadow({ mode: "open" });
    adopt(root);
    if (options.color) host.style.setProperty("--vw-data-color", options.color);
    if (options.textColor) host.style.setProperty("--vw-data-text-color", options.textColor);

    const launcher = h(
      "button",
      { type: "button", class: "launcher", part: "launcher", "aria-expanded": "false", "aria-controls": "panel" },
      microphoneIcon(),
      h("span", { class: "label", textContent: LABEL }),
      h("span", { class: "dot", "aria-hidden": "true" }),
    );
    const close = h("button", { type: "button", class: "close", part: "close", "aria-label": "Close" }, "×");
    const status = h("p", { class: "status", part: "status", role: "status", "aria-live": "polite" });
    const error = h("p", { class: "error", part: "error", role: "alert", hidden: true });
    const call = h("button", { type: "button", class: "call", part: "call" });
    const mute = h("button", {
      type: "button",
      class: "mute",
      part: "mute",
      "aria-pressed": "false",
      disabled: true,
      hidden: MODALITY === "text",
      textContent: "Mute",
    });
    const captions = h("ol", {
      class: "captions",
      part: "captions",
      role: "log",
      "aria-live": "polite",
      "aria-label": "Conversation",
      "data-empty": MODALITY === "text" ? "Messages appear here." : "Live captions appear here.",
    });
    const text = h("input", {
      type: "text",
      id: "say",
      autocomplete: "off",
      placeholder: "Type a message…",
      maxlength: "2000",
      disabled: true,
    });
    const send = h("button", { type: "submit", class: "send", part: "send", textContent: "Send", disabled: true });
    const say = h(
      "form",
      { class: "say", part: "say" },
      h("label", { class: "sr", for: "say", textContent: "Message to the assistant" }),
      text,
      send,
    );
    const panel = h(
      "section",
      { class: "panel", part: "panel", id: "panel", role: "dialog", "aria-labelledby": "title", hidden: true },
      h("div", { class: "head" }, h("h2", { class: "title", id: "title", textContent: TITLE }), close),
      h("div", { class: "body" }, status, error, h("div", { class: "controls" }, call, mute), captions, say),
    );
    // The launcher first, then the panel it opens: the focus order (the panel shows above it, column-reverse).
    const frame = h("div", { class: "vw", "data-position": POSITION, "data-state": "idle" }, launcher, panel);
    root.append(frame);
    if (POSITION === "inline") script.after(host);
    else document.body.append(host);

    let client = null;
    let clientModule = null;
    let retried = false; // a WebRTC connection that failed is retried once over the socket
    let live = null; // the caption line of the agent's answer being spoken
    const pending = []; // typed turns shown at once, until their `user` transcript confirms them
    const loading = import(CLIENT_URL).then((module) => (clientModule = module));
    loading.catch(() => {});

    function setAttribute(name, value) {
      if (value === null || value === undefined) delete host.dataset[name];
      else host.dataset[name] = value;
    }

    function announce() {
      host.dispatchEvent(
        new CustomEvent("voice-widget:state", {
          bubbles: true,
          composed: true,
          detail: {
            state: host.dataset.state,
            callId: host.dataset.callId || null,
            transport: host.dataset.transport || null,
            error: host.dataset.error || null,
          },
        }),
      );
    }

    const STATUS = {
      idle: MODALITY === "text" ? "Press Start to chat with the assistant." : "Press Start to talk to the assistant.",
      connecting: MODALITY === "text" ? "Connecting…" : "Connecting… allow the microphone when your browser asks.",
      live: MODALITY === "text" ? "Connected: type a message." : "Connected: speak now, or type below.",
      stopping: "Ending the call…",
      closed: "The call has ended.",
    };

    function show(state) {
      host.dataset.state = state;
      frame.dataset.state = state;
      const busy = state === "connecting" || state === "stopping";
      const isLive = state === "live";
      const noun = MODALITY === "text" ? "chat" : "call";
      call.textContent = isLive || busy ? `End ${noun}` : `Start ${noun}`;
      call.dataset.live = String(isLive || state === "connecting");
      call.disabled = state === "stopping";
      mute.disabled = !isLive;
      text.disabled = send.disabled = !isLive;
      const never = state === "closed" && !host.dataset.callId;
      const muted = isLive && client && client.muted ? " (muted)" : "";
      status.textContent = never ? "The call did not start." : STATUS[state] + muted;
      launcher.setAttribute(
        "aria-label",
        isLive ? `${LABEL}: call in progress` : LABEL,
      );
      announce();
    }

    function showError(widgetCode, message) {
      setAttribute("error", widgetCode);
      error.textContent = message;
      error.hidden = false;
      announce();
    }

    function clearError() {
      setAttribute("error", null);
      error.textContent = "";
      error.hidden = true;
    }

    function line(kind, who, words) {
      const item = h(
        "li",
        { class: kind },
        h("span", { class: "who", textContent: who }),
        h("span", { class: "words", textContent: words }),
      );
      captions.append(item);
      while (captions.children.length > MAX_LINES) captions.firstElementChild.remove();
      captions.scrollTop = captions.scrollHeight;
      return item;
    }

    function speech({ speaking, text: words }) {
      if (speaking) {
        if (!live) live = line("agent speaking", "Assistant:", "");
        const shown = live.querySelector(".words");
        shown.textContent = shown.textContent ? `${shown.textContent} ${words}` : words;
        captions.scrollTop = captions.scrollHeight;
      } else if (live) {
        live.classList.remove("speaking");
      }
    }

    function transcript({ role, text: words }) {
      if (role === "assistant") {
        // The answer's final words (after a barge-in: only those heard) replace its live caption.
        if (live) {
          live.querySelector(".words").textContent = words;
          live.className = "agent";
        } else {
          line("agent", "Assistant:", words);
        }
        live = null;
        return;
      }
      const same = (value) => value.trim().replace(/\s+/g, " ");
      const typed = pending.find((entry) => same(entry.text) === same(words));
      if (typed) {
        typed.item.classList.remove("pending");
        pending.splice(pending.indexOf(typed), 1);
        return;
      }
      const item = line("user", "You:", words);
      if (live) captions.insertBefore(item, live);
    }

    async function start(transport) {
      clearError();
      if (!key) {
        showError("key", "This widget has no key (data-key on its script tag).");
        return;
      }
      if (!retried) {
        captions.replaceChildren();
        pending.length = 0;
      }
      live = null;
      setAttribute("callId", null);
      setAttribute("transport", null);
      mute.setAttribute("aria-pressed", "false");
      mute.textContent = "Mute";
      host.dataset.muted = "false";
      show("connecting");
      let module = clientModule;
      if (!module) {
        try {
          module = await loading;
        } catch {
          show("closed");
          showError("network", "The voice service cannot be reached. Please try again later.");
          return;
        }
      }
      const wanted =
        transport || (MODALITY === "audio" && TRANSPORT !== "websocket" && module.supportsWebRTC() ? "webrtc" : null);
      const current = new module.VoiceClient({
        modality: MODALITY,
        transport: wanted === "webrtc" ? "auto" : "websocket",
      });
      client = current;
      let lastError = null; // the client's last error event
      let refused = null; // the session request's refusal ({widgetCode, message})
      current.on("state", ({ state }) => {
        if (client !== current) return;
        if (state === "closed") return;
        show(state);
      });
      current.on("transport", ({ transport: chosen }) => setAttribute("transport", chosen));
      current.on("started", ({ callId }) => {
        setAttribute("callId", callId);
        announce();
      });
      current.on("speech", speech);
      current.on("transcript", transcript);
      current.on("transfer", ({ phoneNumber }) => line("note", "", `The assistant passes you to ${phoneNumber}.`));
      current.on("error", (event) => {
        lastError = event;
      });
      current.on("closed", ({ code }) => {
        if (client !== current) return;
        live = null;
        const failedOverWebRtc = lastError && lastError.code === "webrtc" && !current.callId;
        if (failedOverWebRtc && !retried) {
          retried = true; // the token is spent: a new session, over the socket
          start("websocket");
          return;
        }
        retried = false;
        show("closed");
        if (refused) {
          showError(refused.widgetCode || "unavailable", refused.message);
        } else if (lastError && lastError.code === "microphone") {
          showError("microphone", "The microphone is not available. Allow it for this site, then press Start again.");
        } else if (lastError && !current.callId) {
          showError("unavailable", `The call could not start: ${lastError.message}`);
        } else if (lastError && ["engine_error", "server_error", "webrtc"].includes(lastError.code)) {
          showError("ended", lastError.message); // over WebRTC there is no close code: the error says it
        } else if (code >= 4000 && code !== 4408) {
          showError("ended", lastError ? lastError.message : `The call ended unexpectedly (${code}).`);
        }
      });
      const session = requestSession(wanted);
      session.catch((failure) => {
        refused = failure;
      });
      current.connect(
        session.catch((failure) => {
          throw Object.assign(new Error(failure.message), { code: "session" });
        }),
      );
    }

    function open(focus = true) {
      panel.hidden = false;
      launcher.setAttribute("aria-expanded", "true");
      host.dataset.open = "true";
      if (focus) call.focus();
    }

    function shut() {
      panel.hidden = true;
      launcher.setAttribute("aria-expanded", "false");
      host.dataset.open = "false";
      launcher.focus();
    }

    launcher.addEventListener("click", () => (panel.hidden ? open() : shut()));
    close.addEventListener("click", shut);
    frame.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !panel.hidden) {
        event.stopPropagation();
        shut();
      }
    });
    call.addEventListener("click", () => {
      if (client && (client.state === "live" || client.state === "connecting")) client.stop();
      else start(null);
    });
    mute.addEventListener("click", () => {
      if (!client) return;
      client.setMuted(!client.muted);
      mute.setAttribute("aria-pressed", String(client.muted));
      mute.textContent = client.muted ? "Unmute" : "Mute";
      host.dataset.muted = String(client.muted);
      show(client.state);
    });
    say.addEventListener("submit", (event) => {
      event.preventDefault();
      const words = text.value.trim();
      if (!client || !words) return;
      let sent = false;
      try {
        sent = client.sendText(words);
      } catch (failure) {
        showError("text", failure.message);
        return;
      }
      if (!sent) return;
      pending.push({ text: words, item: line("user pending", "You:", words) });
      text.value = "";
      text.focus();
    });

    host.dataset.open = "false";
    host.dataset.muted = "false";
    show("idle");
    if (options.open === "true") open(false);
    const idle = () => !client || client.state === "closed" || client.state === "idle";
    host.voiceWidget = { open, close: shut, start: () => idle() && start(null), stop: () => client && client.stop() };
  }

  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount, { once: true });
})();
