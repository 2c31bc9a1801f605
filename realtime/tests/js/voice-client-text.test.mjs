// The browser voice client's typed turns, its text modality and its tool events
// (realtime/static/voice-client/v1/voice-client.js), under Node's test runner with a fake WebSocket and,
// for the audio modality, a fake microphone and audio graph: what the client sends is read from the fake
// socket, and whether it opened a microphone or an AudioContext from the fakes' records.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";

import { MAX_TEXT_CHARS, VoiceClient } from "../../static/voice-client/v1/voice-client.js";
import { FakeWebSocket, installedForEachTest, recording } from "./fakes.mjs";

const opened = { microphones: 0, contexts: 0, worklets: 0 };

class FakeNode {
  constructor() {
    this.port = { postMessage() {}, onmessage: null };
  }
  connect() {}
  disconnect() {}
}

class FakeAudioContext {
  constructor() {
    opened.contexts += 1;
    this.sampleRate = 48000;
    this.state = "running";
    this.destination = {};
    this.audioWorklet = { addModule: async () => {} };
  }
  resume() {
    return Promise.resolve();
  }
  close() {
    this.state = "closed";
    return Promise.resolve();
  }
  createMediaStreamSource() {
    return new FakeNode();
  }
}

class FakeAudioWorkletNode extends FakeNode {
  constructor() {
    super();
    opened.worklets += 1;
  }
}

const fakeNavigator = {
  mediaDevices: {
    async getUserMedia() {
      opened.microphones += 1;
      return { getTracks: () => [{ stop() {} }] };
    },
  },
};

const GLOBALS = {
  WebSocket: FakeWebSocket,
  AudioContext: FakeAudioContext,
  AudioWorkletNode: FakeAudioWorkletNode,
  navigator: fakeNavigator,
};
installedForEachTest(GLOBALS);

beforeEach(() => {
  FakeWebSocket.opened = [];
  Object.assign(opened, { microphones: 0, contexts: 0, worklets: 0 });
});

/** A client connected through the fake socket, after session.started. */
async function liveClient(options) {
  const client = new VoiceClient(options);
  await client.connect(Promise.resolve("ws://voice.example.test/ws/agents/a1/realtime?token=t"));
  assert.equal(FakeWebSocket.opened.length, 1);
  const socket = FakeWebSocket.opened[0];
  socket.open();
  socket.deliver({ type: "session.started", callId: "call-1" });
  assert.equal(client.state, "live");
  return { client, socket };
}

describe("the text modality", () => {
  test("opens the socket only: no microphone, no audio context, no worklets", async () => {
    const client = new VoiceClient({ modality: "text" });
    const states = recording(client, "state");
    assert.equal(client.modality, "text");
    await client.connect("ws://voice.example.test/ws/agents/a1/realtime?token=t");
    assert.deepEqual(opened, { microphones: 0, contexts: 0, worklets: 0 });
    assert.equal(FakeWebSocket.opened[0].url, "ws://voice.example.test/ws/agents/a1/realtime?token=t");
    FakeWebSocket.opened[0].open();
    FakeWebSocket.opened[0].deliver({ type: "session.started", callId: "call-1" });
    assert.deepEqual(
      states.map(({ state }) => state),
      ["connecting", "live"],
    );
    assert.equal(client.callId, "call-1");
    assert.equal(client.sampleRate(), null);
  });

  test("a typed turn goes out as input_text and the answer comes back as transcripts, no audio", async () => {
    const { client, socket } = await liveClient({ modality: "text" });
    const transcripts = recording(client, "transcript");
    const errors = recording(client, "error");
    assert.equal(client.sendText("  What are your opening hours?  "), true);
    assert.deepEqual(socket.sent, [{ type: "input_text", text: "What are your opening hours?" }]);
    socket.deliver({ type: "transcript", role: "user", text: "What are your opening hours?" });
    socket.deliver({ type: "output_audio", audio: "AAAA", encoding: "pcm16", sampleRate: 24000 }); // ignored
    socket.deliver({ type: "transcript", role: "assistant", text: "We are open from nine to five." });
    assert.deepEqual(transcripts, [
      { role: "user", text: "What are your opening hours?" },
      { role: "assistant", text: "We are open from nine to five." },
    ]);
    assert.deepEqual(errors, []);
    assert.equal(client.queuedSamples(), 0);
    client.stop();
    assert.deepEqual(socket.sent.at(-1), { type: "stop" });
    socket.close(1000, "conversation ended");
    assert.equal(client.state, "closed");
  });

  test("stop() while the session URL is being fetched opens no socket", async () => {
    const client = new VoiceClient({ modality: "text" });
    const closed = recording(client, "closed");
    let resolve;
    const connecting = client.connect(new Promise((done) => (resolve = done)));
    client.stop();
    resolve("ws://voice.example.test/ws/agents/a1/realtime?token=t");
    await connecting;
    assert.equal(FakeWebSocket.opened.length, 0);
    assert.equal(client.state, "closed");
    assert.equal(closed.length, 1);
  });

  test("a session request that fails is an error and the client closes", async () => {
    const client = new VoiceClient({ modality: "text" });
    const errors = recording(client, "error");
    const closed = recording(client, "closed");
    const refused = Object.assign(new Error("Agent is inactive"), { code: "session" });
    await client.connect(Promise.reject(refused));
    assert.deepEqual(errors, [{ code: "session", message: "Agent is inactive" }]);
    assert.equal(closed.length, 1);
    assert.equal(FakeWebSocket.opened.length, 0);
  });

  test("an unknown modality is refused", () => {
    assert.throws(() => new VoiceClient({ modality: "video" }), /modality must be one of audio, text/);
    assert.equal(new VoiceClient().modality, "audio");
  });
});

describe("typed turns", () => {
  test("an audio session opens the microphone and takes typed turns too", async () => {
    const { client, socket } = await liveClient();
    assert.equal(client.modality, "audio");
    assert.equal(opened.microphones, 1);
    assert.equal(opened.contexts, 1);
    assert.equal(client.sendText("Book a table for two"), true);
    assert.deepEqual(socket.sent, [{ type: "input_text", text: "Book a table for two" }]);
  });

  test("nothing is sent before session.started or after the end", async () => {
    const client = new VoiceClient({ modality: "text" });
    assert.equal(client.sendText("hello"), false); // idle
    await client.connect("ws://voice.example.test/ws/agents/a1/realtime?token=t");
    const socket = FakeWebSocket.opened[0];
    socket.open();
    assert.equal(client.sendText("hello"), false); // connecting: the server is not listening yet
    socket.deliver({ type: "session.started", callId: "call-1" });
    assert.equal(client.sendText("hello"), true);
    socket.close(1000, "conversation ended");
    assert.equal(client.sendText("hello again"), false);
    assert.deepEqual(socket.sent, [{ type: "input_text", text: "hello" }]);
  });

  test("an empty, blank, too long or non-string text is refused and not sent", async () => {
    const { client, socket } = await liveClient({ modality: "text" });
    assert.throws(() => client.sendText(""), /empty/);
    assert.throws(() => client.sendText("   \n"), /empty/);
    assert.throws(() => client.sendText("x".repeat(MAX_TEXT_CHARS + 1)), /at most 2000 characters/);
    assert.throws(() => client.sendText(42), TypeError);
    assert.equal(client.sendText("x".repeat(MAX_TEXT_CHARS)), true);
    assert.equal(socket.sent.length, 1);
  });
});

describe("tool events", () => {
  test("tool.call and tool.result reach the app with their id, arguments, result and duration", async () => {
    const { client, socket } = await liveClient({ modality: "text" });
    const calls = recording(client, "tool.call");
    const results = recording(client, "tool.result");
    const phases = recording(client, "tool");
    socket.deliver({ type: "tool.started", name: "lookup_order" });
    socket.deliver({ type: "tool.call", id: "t1", name: "lookup_order", arguments: { order_number: "3561" } });
    socket.deliver({
      type: "tool.result",
      id: "t1",
      name: "lookup_order",
      result: { status: "shipped" },
      durationMs: 42,
      status: "success",
    });
    socket.deliver({ type: "tool.finished", name: "lookup_order", status: "success" });
    socket.deliver({ type: "tool.result", id: "t2", name: "transfer_call", result: "Transferring", status: "error" });
    assert.deepEqual(calls, [{ id: "t1", name: "lookup_order", arguments: { order_number: "3561" } }]);
    assert.deepEqual(results, [
      { id: "t1", name: "lookup_order", result: { status: "shipped" }, durationMs: 42, status: "success" },
      { id: "t2", name: "transfer_call", result: "Transferring", durationMs: null, status: "error" },
    ]);
    assert.deepEqual(
      phases.map(({ phase }) => phase),
      ["started", "finished"],
    );
  });
});
