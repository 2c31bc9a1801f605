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
// The page only ever handles the short-lived websocketUrl that its own backend obtained with the API key.
import { base64ToBytes, bytesToBase64, meterFill, pcm16ToBytes } from "./audio-math.js";

export { meterFill };

export const VERSION = "1";
const WORKLET_URL = new URL("./voice-worklet.js", import.meta.url);
export const MODALITIES = ["audio", "text"];
export const MAX_TEXT_CHARS = 2000; // the longest input_text the server takes
const EVENTS = [
  "state",
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

/**
 * One conversation. Events (`on(name, handler)`, handler gets one object):
 * - `state` {state}: "idle" -> "connecting" -> "live" (after session.started) -> "stopping" -> "closed"
 * - `started` {callId}
 * - `transcript` {role: "user" | "assistant", text}
 * - `speech` {speaking, text, answer, interrupted}: the agent's words as it speaks them. While it
 *   speaks (`speaking` true): `text` is the sentence whose audio starts playing now, `answer` the
 *   answer's sentences so far. When it stops (`speaking` false, `text` ""): `interrupted` says whether
 *   it was cut (barge-in, or the call ended). The `assistant` transcript follows with what was heard.
 * - `clear` {droppedSamples, queuedSamples, sampleRate}: barge-in; the queued agent audio was dropped
 * - `tool` {name, phase: "started" | "finished", status, error}: `status` ("success", "error",
 *   "timeout") and, for a failure, `error` (the reason in plain words) come with "finished"
 * - `tool.call` {id, name, arguments}: the agent calls a tool (sessions opened with "events": ["tool"])
 * - `tool.result` {id, name, result, durationMs, status}: its result (`id` matches the `tool.call`)
 * - `transfer` {phoneNumber}
 * - `closed` {code, reason}
 * - `error` {code, message}: the server's `error` messages, and the client's own ("microphone",
 *   "audio", "socket")
 * - `level` {rms, meter}: microphone level (0..1) of each 20 ms frame, and `meter`, its fill (0..1)
 *   on a -60..0 dBFS scale, for meters
 * - `queue` {queuedSamples, playing, sampleRate}: the playback queue's length when it changes
 */
export class VoiceClient {
  /**
   * `modality`: "audio" (microphone in, agent audio out, and typed turns with sendText) or "text" (typed
   * turns only: no microphone, no audio playback; open the session with "modality": "text").
   */
  constructor({ frameMs = 20, jitterMs = 80, maxWaitMs = 120, modality = "audio" } = {}) {
    if (frameMs < 20 || frameMs > 40) throw new Error("frameMs must be between 20 and 40");
    if (!MODALITIES.includes(modality)) throw new Error(`modality must be one of ${MODALITIES.join(", ")}`);
    this.options = { frameMs, jitterMs, maxWaitMs };
    this.modality = modality;
    this.state = "idle";
    this.callId = null;
    this.handlers = new Map(EVENTS.map((name) => [name, new Set()]));
    this.socket = null;
    this.context = null;
    this.stream = null;
    this.capture = null;
    this.playback = null;
    this.source = null;
    this.queued = 0;
    this.stopTimer = null;
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

  /** Agent audio queued for playback and not yet played, in samples at the AudioContext's rate. */
  queuedSamples() {
    return this.queued;
  }

  /** The AudioContext's sample rate (the unit of queuedSamples), once connected. */
  sampleRate() {
    return this.context ? this.context.sampleRate : null;
  }

  /**
   * Starts the conversation: microphone, audio graph, socket (in the text modality: the socket only).
   * `websocketUrl` is the session's URL or a promise of it; pass the promise when the URL is still being
   * fetched, so that the audio context is created at once, inside the click that started the call
   * (browsers allow sound only then).
   */
  async connect(websocketUrl) {
    if (this.state !== "idle") throw new Error(`connect() on a client that is ${this.state}`);
    this.setState("connecting");
    if (this.modality === "text") return this.connectText(websocketUrl);
    try {
      this.context = new AudioContext({ latencyHint: "interactive" });
      const ready = this.context.resume();
      const [url, stream] = await Promise.all([
        Promise.resolve(websocketUrl),
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
      if (this.state !== "connecting") return this.release(); // stop() while we were getting ready
      this.buildGraph();
      this.openSocket(url);
    } catch (error) {
      if (this.state === "connecting") this.fail(error.code || "audio", error.message || String(error));
    }
  }

  async connectText(websocketUrl) {
    let url;
    try {
      url = await Promise.resolve(websocketUrl);
    } catch (error) {
      if (this.state === "connecting") this.fail(error.code || "socket", error.message || String(error));
      return;
    }
    if (this.state !== "connecting") return; // stop() while the URL was being fetched
    this.openSocket(url);
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
    if (this.state !== "live" || !this.socket || this.socket.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify({ type: "input_text", text: trimmed }));
    return true;
  }

  buildGraph() {
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
    // Audio counts from session.started on: before it the server is not listening yet.
    if (this.state !== "live" || this.socket.readyState !== WebSocket.OPEN) return;
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
        // the messages after this one wait for it.
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
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ type: "stop" }));
      // The server closes with 1000; close from this side if it does not within 3 s.
      this.stopTimer = setTimeout(() => socket.close(1000, "stop"), 3000);
    } else if (socket && socket.readyState === WebSocket.CONNECTING) {
      socket.close(1000, "stop");
    } else if (!socket) {
      this.finish(1000, "stopped before connecting");
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
    this.stream = this.source = this.capture = this.playback = null;
    this.queued = 0;
    // No worklet answers a pending clear any more: what waited for it is handled now.
    if (this.held !== null) {
      this.emit("clear", { droppedSamples: 0, queuedSamples: 0, sampleRate: null });
      this.releaseHeld();
    }
  }
}
