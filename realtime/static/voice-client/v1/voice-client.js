// Browser client of the voice agent service's realtime sessions (protocol: docs/reference/realtime-protocol.md).
// A plain ES module, no build step, served at /static/voice-client/v1/voice-client.js.
//
//   import { VoiceClient } from "/static/voice-client/v1/voice-client.js";
//   const client = new VoiceClient();
//   client.on("transcript", ({ role, text }) => ...);
//   client.on("speech", ({ speaking, text }) => ...);   // the agent's words as it speaks them
//   client.connect(fetch("/my-backend/voice-session").then((r) => r.json()).then((s) => s.websocketUrl));
//   ...
//   client.sendText("What are your opening hours?");   // a typed turn (also in an audio session)
//   client.stop();
//
// `new VoiceClient({ modality: "text" })` talks by text only (a session opened with "modality": "text"):
// no microphone, no audio context, no playback.
//
// WebRTC: pass the whole session answer (`connect(session)`, or a promise of it) of a session opened with
// "transport": "webrtc": the client then sends the microphone and plays the agent on media tracks (the
// browser's echo canceller, jitter buffer and Opus), with the JSON messages on the "events" data channel,
// and falls back to `websocketUrl` when the browser has no WebRTC or the offer is refused.
//
// The page only ever handles the short-lived session (websocketUrl, offerUrl: the single-use token) that
// its own backend (or a widget key) obtained; never an API key.
import { base64ToBytes, bytesToBase64, meterFill, pcm16ToBytes } from "./audio-math.js";

export { meterFill };

export const VERSION = "1";
const WORKLET_URL = new URL("./voice-worklet.js", import.meta.url);
export const MODALITIES = ["audio", "text"];
export const MAX_TEXT_CHARS = 2000; // the longest input_text the server takes
export const TRANSPORTS = ["auto", "webrtc", "websocket"];
// How long the client gathers its ICE candidates before it sends the offer (the rest are trickled), and
// how long the WebRTC connection may take to open its data channel once the offer was answered.
const ICE_GATHERING_MS = 1000;
const WEBRTC_CONNECT_MS = 15000;
const STOP_WAIT_MS = 3000;
const EVENTS = [
  "state",
  "transport",
  "started",
  "transcript",
  "speech",
  "clear",
  "tool",
  "tool.call",
  "tool.result",
  "transfer",
  "closed",
  "error",
  "level",
  "queue",
];

/** Whether this browser can talk over WebRTC (RTCPeerConnection and a microphone API). */
export function supportsWebRTC() {
  return (
    typeof globalThis.RTCPeerConnection === "function" &&
    typeof globalThis.navigator !== "undefined" &&
    Boolean(globalThis.navigator.mediaDevices)
  );
}

/** The session's parts the client uses, from a websocketUrl string or a session answer object. */
function sessionParts(session) {
  if (typeof session === "string") return { websocketUrl: session, webrtc: null };
  if (session && typeof session === "object") {
    const webrtc = session.webrtc && typeof session.webrtc.offerUrl === "string" ? session.webrtc : null;
    return { websocketUrl: typeof session.websocketUrl === "string" ? session.websocketUrl : null, webrtc };
  }
  return { websocketUrl: null, webrtc: null };
}

const delay = (ms) => new Promise((done) => setTimeout(done, ms));

/**
 * One conversation. Events (`on(name, handler)`, handler gets one object):
 * - `state` {state}: "idle" -> "connecting" -> "live" (after session.started) -> "stopping" -> "closed"
 * - `transport` {transport: "webrtc" | "websocket", fallback}: the way the conversation goes, once chosen;
 *   `fallback` is why WebRTC was not used (null when it was, or was not offered)
 * - `started` {callId}
 * - `transcript` {role: "user" | "assistant", text}
 * - `speech` {speaking, text, answer, interrupted}: the agent's words as it speaks them. While it
 *   speaks (`speaking` true): `text` is the sentence whose audio starts playing now, `answer` the
 *   answer's sentences so far. When it stops (`speaking` false, `text` ""): `interrupted` says whether
 *   it was cut (barge-in, or the call ended). The `assistant` transcript follows with what was heard.
 * - `clear` {droppedSamples, queuedSamples, sampleRate}: barge-in; the queued agent audio was dropped
 *   (over WebRTC the server stops the track's audio: `droppedSamples` 0, `sampleRate` null)
 * - `tool` {name, phase: "started" | "finished", status, error}: `status` ("success", "error",
 *   "timeout") and, for a failure, `error` (the reason in plain words) come with "finished"
 * - `tool.call` {id, name, arguments}: the agent calls a tool (sessions opened with "events": ["tool"])
 * - `tool.result` {id, name, result, durationMs, status}: its result (`id` matches the `tool.call`)
 * - `transfer` {phoneNumber}
 * - `closed` {code, reason}
 * - `error` {code, message}: the server's `error` messages, and the client's own ("microphone",
 *   "audio", "socket", "session", "webrtc")
 * - `level` {rms, meter}: microphone level (0..1) of each 20 ms frame, and `meter`, its fill (0..1)
 *   on a -60..0 dBFS scale, for meters
 * - `queue` {queuedSamples, playing, sampleRate}: the playback queue's length when it changes (the
 *   socket's playback only)
 */
export class VoiceClient {
  /**
   * `modality`: "audio" (microphone in, agent audio out, and typed turns with sendText) or "text" (typed
   * turns only: no microphone, no audio playback; open the session with "modality": "text").
   * `transport`: "auto" (WebRTC when the session offers it and the browser can, else the socket),
   * "webrtc" (the same: the socket remains the fallback) or "websocket" (never WebRTC).
   */
  constructor({ frameMs = 20, jitterMs = 80, maxWaitMs = 120, modality = "audio", transport = "auto" } = {}) {
    if (frameMs < 20 || frameMs > 40) throw new Error("frameMs must be between 20 and 40");
    if (!MODALITIES.includes(modality)) throw new Error(`modality must be one of ${MODALITIES.join(", ")}`);
    if (!TRANSPORTS.includes(transport)) throw new Error(`transport must be one of ${TRANSPORTS.join(", ")}`);
    this.options = { frameMs, jitterMs, maxWaitMs, transport };
    this.modality = modality;
    this.transport = null; // "webrtc" or "websocket", once chosen
    this.state = "idle";
    this.callId = null;
    this.muted = false;
    this.handlers = new Map(EVENTS.map((name) => [name, new Set()]));
    this.socket = null;
    this.peer = null; // RTCPeerConnection
    this.channel = null; // its "events" data channel
    this.offerUrl = null; // the WebRTC session's URL, once the offer was answered
    this.audio = null; // the <audio> element that plays the agent's track
    this.context = null;
    this.stream = null;
    this.capture = null;
    this.playback = null;
    this.source = null;
    this.queued = 0;
    this.stopTimer = null;
    this.connectTimer = null;
    this.speaking = false; // the agent is speaking (between agent_speech and agent_speech.ended)
    this.speechText = ""; // the sentence it is speaking
    this.answerText = ""; // its answer so far (the sentences of this answer)
    this.micLevel = 0; // the microphone's last level (RMS, 0..1)
    // The server's messages that came after a `clear`, held until the playback worklet has dropped its
    // queue (its `cleared` answer raises the `clear` event), so that the events keep the server's order:
    // on a busy machine a barge-in's `clear` and the caller's `user` transcript can come together.
    this.held = null;
  }

  on(name, handler) {
    const set = this.handlers.get(name);
    if (!set) throw new Error(`unknown event ${name}; one of ${EVENTS.join(", ")}`);
    set.add(handler);
    return () => set.delete(handler);
  }

  emit(name, detail) {
    for (const handler of this.handlers.get(name)) {
      try {
        handler(detail);
      } catch (error) {
        console.error(`voice-client: a ${name} handler failed`, error);
      }
    }
  }

  setState(state) {
    this.state = state;
    this.emit("state", { state });
  }

  setTransport(transport, fallback = null) {
    this.transport = transport;
    this.emit("transport", { transport, fallback });
  }

  /** Agent audio queued for playback and not yet played, in samples at the AudioContext's rate. */
  queuedSamples() {
    return this.queued;
  }

  /** The AudioContext's sample rate (the unit of queuedSamples), once connected. */
  sampleRate() {
    return this.context ? this.context.sampleRate : null;
  }

  /**
   * Mutes or unmutes the microphone: the server then hears silence (the conversation goes on). The
   * `muted` property says which.
   */
  setMuted(muted) {
    this.muted = Boolean(muted);
    if (this.stream) for (const track of this.stream.getTracks()) track.enabled = !this.muted; // audio only
  }

  /**
   * Starts the conversation: microphone, audio graph, and the session's transport (in the text modality:
   * the socket only). `session` is the session's websocketUrl, or the session answer itself
   * ({websocketUrl, webrtc: {offerUrl, iceServers}}), or a promise of either; pass the promise when the
   * session is still being fetched, so that the audio context is created at once, inside the click that
   * started the call (browsers allow sound only then).
   */
  async connect(session) {
    if (this.state !== "idle") throw new Error(`connect() on a client that is ${this.state}`);
    this.setState("connecting");
    if (this.modality === "text") return this.connectText(session);
    try {
      this.context = new AudioContext({ latencyHint: "interactive" });
      const ready = this.context.resume();
      const [answer, stream] = await Promise.all([
        Promise.resolve(session),
        navigator.mediaDevices
          .getUserMedia({
            audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
          })
          .catch((error) => {
            throw Object.assign(new Error(`Microphone unavailable: ${error.message || error.name}`), {
              code: "microphone",
            });
          }),
        this.context.audioWorklet.addModule(WORKLET_URL.href),
        ready,
      ]);
      this.stream = stream;
      this.setMuted(this.muted);
      if (this.state !== "connecting") return this.release(); // stop() while we were getting ready
      const { websocketUrl, webrtc } = sessionParts(answer);
      let fallback = null;
      if (webrtc && this.options.transport !== "websocket") {
        if (supportsWebRTC()) {
          fallback = await this.openPeer(webrtc, Boolean(websocketUrl));
          if (fallback === null || this.state !== "connecting") return;
        } else {
          fallback = "This browser has no WebRTC";
        }
      }
      if (!websocketUrl) throw Object.assign(new Error("The session has no websocketUrl"), { code: "session" });
      this.buildGraph(true);
      this.setTransport("websocket", fallback);
      this.openSocket(websocketUrl);
    } catch (error) {
      if (this.state === "connecting") this.fail(error.code || "audio", error.message || String(error));
    }
  }

  async connectText(session) {
    let answer;
    try {
      answer = await Promise.resolve(session);
    } catch (error) {
      if (this.state === "connecting") this.fail(error.code || "socket", error.message || String(error));
      return;
    }
    if (this.state !== "connecting") return; // stop() while the URL was being fetched
    const { websocketUrl } = sessionParts(answer);
    if (!websocketUrl) return this.fail("session", "The session has no websocketUrl");
    this.setTransport("websocket");
    this.openSocket(websocketUrl);
  }

  /**
   * The conversation over WebRTC: the microphone's track out, the agent's track in (played by an <audio>
   * element, which the browser's echo canceller takes as its reference), the JSON messages on the "events"
   * data channel. The offer goes to `offerUrl` (the session token is in it): null once it was answered
   * (the token is spent: a failure from here on ends the call), else why it failed (the token was not
   * spent when the server refused it, so the socket may still take it).
   */
  async openPeer({ offerUrl, iceServers }, canFallBack) {
    let peer;
    let taken = false; // the SDP snapshot sent as the offer: later candidates are trickled
    const trickled = [];
    try {
      peer = new RTCPeerConnection({ iceServers: Array.isArray(iceServers) ? iceServers : [] });
      this.peer = peer;
      for (const track of this.stream.getTracks()) peer.addTrack(track, this.stream);
      const channel = peer.createDataChannel("events");
      this.channel = channel;
      channel.onmessage = (event) => {
        if (typeof event.data === "string") this.onMessage(event.data);
      };
      channel.onclose = () => this.onPeerClosed(1000, "The agent ended the call");
      peer.ontrack = (event) => this.playTrack(event);
      peer.onicecandidate = ({ candidate }) => {
        if (!taken) return; // in the offer's SDP
        const fragment = candidate
          ? { candidate: candidate.candidate, sdpMid: candidate.sdpMid, sdpMLineIndex: candidate.sdpMLineIndex }
          : { candidate: "" }; // the end of the candidates
        if (this.offerUrl) this.trickle(fragment);
        else trickled.push(fragment);
      };
      peer.onconnectionstatechange = () => {
        if (peer.connectionState === "failed") this.onPeerFailed();
      };
      await peer.setLocalDescription(await peer.createOffer());
      await this.gathered(peer);
      if (this.state !== "connecting") {
        this.closePeer(); // stop() while the offer was being made: the token is not spent
        return null;
      }
      taken = true;
      const response = await fetch(offerUrl, {
        method: "POST",
        headers: { "Content-Type": "application/sdp" },
        body: peer.localDescription.sdp,
      });
      if (response.status !== 201) {
        let message = `HTTP ${response.status}`;
        try {
          const type = response.headers.get("Content-Type") || "";
          if (type.includes("json")) message = (await response.json()).error || message;
        } catch {
          // the status says enough
        }
        throw new Error(`The WebRTC offer was refused (${message})`);
      }
      const sdp = await response.text();
      if (this.state !== "connecting") {
        // stop() while the offer was on its way: the server's session ends at once.
        this.hangUpPeer(offerUrl);
        this.closePeer();
        return null;
      }
      await peer.setRemoteDescription({ type: "answer", sdp });
    } catch (error) {
      if (peer) this.closePeer();
      const reason = error.message || String(error);
      if (this.state !== "connecting") return null;
      if (!canFallBack) throw Object.assign(new Error(reason), { code: "webrtc" });
      return reason;
    }
    this.offerUrl = offerUrl;
    for (const fragment of trickled.splice(0)) this.trickle(fragment);
    this.buildGraph(false);
    this.setTransport("webrtc");
    // The token is spent: a connection that does not open ends the call (ask for a new session to retry,
    // over the socket).
    this.connectTimer = setTimeout(() => {
      if (this.transport === "webrtc" && (!this.channel || this.channel.readyState !== "open")) this.onPeerFailed();
    }, WEBRTC_CONNECT_MS);
    return null;
  }

  /** Until the peer has gathered its ICE candidates, or ICE_GATHERING_MS (the rest are trickled). */
  async gathered(peer) {
    if (peer.iceGatheringState === "complete") return;
    await Promise.race([
      delay(ICE_GATHERING_MS),
      new Promise((done) => {
        peer.addEventListener("icegatheringstatechange", () => {
          if (peer.iceGatheringState === "complete") done();
        });
      }),
    ]);
  }

  trickle(fragment) {
    fetch(this.offerUrl, {
      method: "PATCH",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(fragment),
    }).catch(() => {}); // a candidate the server does not get is one fewer path; the others may do
  }

  playTrack(event) {
    if (typeof document === "undefined") return;
    if (!this.audio) {
      this.audio = document.createElement("audio");
      this.audio.autoplay = true;
    }
    this.audio.srcObject = event.streams && event.streams[0] ? event.streams[0] : new MediaStream([event.track]);
    this.audio.play().catch((error) => this.emit("error", { code: "audio", message: `Playback: ${error.message}` }));
  }

  /**
   * Sends a typed caller turn (`input_text`): the agent answers it like a spoken one (in an audio session
   * it interrupts the agent, like a barge-in). True when sent; false when the session is not live (before
   * `session.started` or after the end). Throws for an empty text or one over MAX_TEXT_CHARS characters.
   * The caller's turn comes back as a `user` transcript.
   */
  sendText(text) {
    if (typeof text !== "string") throw new TypeError("sendText(text): text must be a string");
    const trimmed = text.trim();
    if (!trimmed) throw new Error("sendText(text): the text is empty");
    if (trimmed.length > MAX_TEXT_CHARS) throw new Error(`sendText(text): at most ${MAX_TEXT_CHARS} characters`);
    if (this.state !== "live") return false;
    return this.send({ type: "input_text", text: trimmed });
  }

  /** Whether the socket or the data channel is open. */
  opened() {
    if (this.transport === "webrtc") return Boolean(this.channel && this.channel.readyState === "open");
    return Boolean(this.socket && this.socket.readyState === WebSocket.OPEN);
  }

  /** A message to the server on the socket or the data channel; false when neither is open. */
  send(message) {
    if (!this.opened()) return false;
    (this.transport === "webrtc" ? this.channel : this.socket).send(JSON.stringify(message));
    return true;
  }

  /** The microphone's worklet (its level, and the socket's audio) and, for the socket, the playback's. */
  buildGraph(withPlayback) {
    const context = this.context;
    this.source = context.createMediaStreamSource(this.stream);
    this.capture = new AudioWorkletNode(context, "voice-capture", {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { targetRate: 16000, frameMs: this.options.frameMs },
    });
    this.capture.port.onmessage = (event) => this.onCaptured(event.data);
    this.source.connect(this.capture);
    // The capture node outputs silence; connecting it keeps it in the rendering graph in every browser.
    this.capture.connect(context.destination);
    if (!withPlayback) return; // over WebRTC the agent's audio is the track's, played by an <audio> element
    this.playback = new AudioWorkletNode(context, "voice-playback", {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { inputRate: 24000, startMs: this.options.jitterMs, maxWaitMs: this.options.maxWaitMs },
    });
    this.playback.port.onmessage = (event) => this.onPlayback(event.data);
    this.playback.connect(context.destination);
  }

  openSocket(url) {
    const socket = new WebSocket(url);
    this.socket = socket;
    socket.onmessage = (event) => this.onMessage(event.data);
    socket.onerror = () => {
      if (socket.readyState !== WebSocket.OPEN) this.emit("error", { code: "socket", message: "Connection failed" });
    };
    socket.onclose = (event) => this.onClose(event.code, event.reason);
  }

  onCaptured(message) {
    if (message.type !== "audio") return;
    this.micLevel = message.level;
    this.emit("level", { rms: message.level, meter: meterFill(message.level) });
    // Over WebRTC the microphone goes on its track. On the socket, audio counts from session.started on:
    // before it the server is not listening yet.
    if (this.transport !== "websocket" || this.state !== "live" || !this.opened()) return;
    const bytes = pcm16ToBytes(new Int16Array(message.pcm));
    this.socket.send(JSON.stringify({ type: "input_audio", audio: bytesToBase64(bytes) }));
  }

  onPlayback(message) {
    if (message.type === "cleared") {
      this.queued = message.queued;
      this.emit("clear", {
        droppedSamples: message.dropped,
        queuedSamples: message.queued,
        sampleRate: message.sampleRate,
      });
      this.releaseHeld();
    } else if (message.type === "queue") {
      this.queued = message.queued;
      this.emit("queue", { queuedSamples: message.queued, playing: message.playing, sampleRate: message.sampleRate });
    }
  }

  /** Handles the messages held since a `clear`, in order (a `clear` among them holds the rest again). */
  releaseHeld() {
    const held = this.held || [];
    this.held = null;
    while (held.length && this.held === null) this.onMessage(held.shift());
    if (this.held !== null) this.held.push(...held);
  }

  onMessage(raw) {
    if (this.held !== null) {
      this.held.push(raw);
      return;
    }
    let message;
    try {
      message = JSON.parse(raw);
    } catch {
      return;
    }
    switch (message.type) {
      case "session.started":
        this.callId = message.callId;
        clearTimeout(this.connectTimer);
        if (this.state === "connecting") this.setState("live");
        this.emit("started", { callId: message.callId });
        break;
      case "output_audio": {
        if (!this.playback || this.state === "stopping") break;
        const bytes = base64ToBytes(message.audio);
        this.playback.port.postMessage({ type: "audio", bytes: bytes.buffer, rate: message.sampleRate }, [
          bytes.buffer,
        ]);
        break;
      }
      case "clear":
        // The worklet drops its queue and answers "cleared"; that answer raises the `clear` event, and
        // the messages after this one wait for it. Over WebRTC the server has stopped the track's audio.
        if (this.playback) {
          this.held = [];
          this.playback.port.postMessage({ type: "clear" });
        } else this.emit("clear", { droppedSamples: 0, queuedSamples: 0, sampleRate: null });
        break;
      case "transcript":
        this.emit("transcript", { role: message.role, text: message.text });
        break;
      case "agent_speech":
        if (typeof message.text === "string" && message.text) this.speechStarted(message.text);
        break;
      case "agent_speech.ended":
        this.speechEnded(Boolean(message.interrupted));
        break;
      case "tool.started":
        this.emit("tool", { name: message.name, phase: "started" });
        break;
      case "tool.finished":
        this.emit("tool", {
          name: message.name,
          phase: "finished",
          status: message.status || null,
          error: message.error || null,
        });
        break;
      case "tool.call":
        this.emit("tool.call", {
          id: message.id ?? null,
          name: message.name,
          arguments: message.arguments ?? {},
        });
        break;
      case "tool.result":
        this.emit("tool.result", {
          id: message.id ?? null,
          name: message.name,
          result: message.result ?? null,
          durationMs: typeof message.durationMs === "number" ? message.durationMs : null,
          status: message.status || null,
        });
        break;
      case "transfer":
        this.emit("transfer", { phoneNumber: message.phoneNumber });
        break;
      case "error":
        this.emit("error", { code: message.code, message: message.message });
        break;
      default:
        break; // later protocol versions may add messages
    }
  }

  speechStarted(text) {
    this.answerText = this.speaking ? `${this.answerText} ${text}` : text;
    this.speaking = true;
    this.speechText = text;
    this.emit("speech", { speaking: true, text, answer: this.answerText, interrupted: false });
  }

  speechEnded(interrupted) {
    if (!this.speaking) return;
    this.speaking = false;
    this.speechText = "";
    this.emit("speech", { speaking: false, text: "", answer: this.answerText, interrupted });
  }

  /** Ends the conversation: sends `stop`, stops the microphone and playback; `closed` follows. */
  stop() {
    if (this.state === "closed" || this.state === "stopping") return;
    const socket = this.socket;
    this.setState("stopping");
    this.release();
    if (this.transport === "webrtc") return this.stopPeer();
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ type: "stop" }));
      // The server closes with 1000; close from this side if it does not within 3 s.
      this.stopTimer = setTimeout(() => socket.close(1000, "stop"), STOP_WAIT_MS);
    } else if (socket && socket.readyState === WebSocket.CONNECTING) {
      socket.close(1000, "stop");
    } else if (!socket) {
      // Nothing opened yet (the session or the WebRTC offer still on its way: connect() ends it).
      this.finish(1000, "stopped before connecting");
    }
  }

  /** stop() over WebRTC: `stop` on the channel, the server closes it; else DELETE ends the session. */
  stopPeer() {
    if (this.channel && this.channel.readyState === "open") {
      this.channel.send(JSON.stringify({ type: "stop" }));
      this.stopTimer = setTimeout(() => this.onPeerClosed(1000, "stop"), STOP_WAIT_MS);
      return;
    }
    this.hangUpPeer(this.offerUrl);
    this.onPeerClosed(1000, "stop");
  }

  /** Ends the WebRTC session on the server (DELETE offerUrl), when the channel cannot say `stop`. */
  hangUpPeer(offerUrl) {
    if (offerUrl) fetch(offerUrl, { method: "DELETE", keepalive: true }).catch(() => {});
  }

  onPeerClosed(code, reason) {
    if (this.transport !== "webrtc" || this.state === "closed") return;
    clearTimeout(this.stopTimer);
    clearTimeout(this.connectTimer);
    this.closePeer();
    this.release();
    this.finish(code, reason);
  }

  /** The connection failed (ICE or DTLS) or never opened: the call ends. */
  onPeerFailed() {
    if (this.transport !== "webrtc" || this.state === "closed") return;
    const live = this.state === "live" || this.callId !== null;
    const message = live
      ? "The WebRTC connection was lost"
      : "The WebRTC connection could not be opened (UDP blocked? the server may need a TURN server)";
    this.emit("error", { code: "webrtc", message });
    this.hangUpPeer(this.offerUrl);
    this.onPeerClosed(1006, message);
  }

  closePeer() {
    const peer = this.peer;
    if (this.channel) {
      this.channel.onclose = this.channel.onmessage = null;
      if (this.channel.readyState !== "closed") this.channel.close();
    }
    if (peer) {
      peer.onconnectionstatechange = peer.ontrack = peer.onicecandidate = null;
      if (peer.connectionState !== "closed") peer.close();
    }
    this.peer = this.channel = null;
    if (this.audio) {
      this.audio.pause();
      this.audio.srcObject = null;
    }
  }

  onClose(code, reason) {
    clearTimeout(this.stopTimer);
    this.release();
    this.finish(code, reason);
  }

  fail(code, message) {
    this.emit("error", { code, message });
    if (this.socket && this.socket.readyState <= WebSocket.OPEN) {
      this.socket.close(1000, code);
      return;
    }
    if (this.peer) {
      this.hangUpPeer(this.offerUrl);
      this.closePeer();
    }
    this.release();
    this.finish(1006, message);
  }

  finish(code, reason) {
    if (this.state === "closed") return;
    this.queued = 0;
    this.speechEnded(true);
    this.setState("closed");
    this.emit("closed", { code, reason });
  }

  /** Microphone off, audio graph torn down (idempotent). */
  release() {
    if (this.capture) this.capture.port.postMessage({ type: "stop" });
    if (this.stream) for (const track of this.stream.getTracks()) track.stop();
    if (this.source) this.source.disconnect();
    if (this.context && this.context.state !== "closed") this.context.close().catch(() => {});
    if (this.audio) this.audio.pause();
    this.stream = this.source = this.capture = this.playback = null;
    this.queued = 0;
    // No worklet answers a pending clear any more: what waited for it is handled now.
    if (this.held !== null) {
      this.emit("clear", { droppedSamples: 0, queuedSamples: 0, sampleRate: null });
      this.releaseHeld();
    }
  }
}
