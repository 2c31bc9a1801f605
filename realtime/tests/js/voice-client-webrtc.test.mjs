// The browser voice client over WebRTC (realtime/static/voice-client/v1/voice-client.js), under Node's
// test runner with a fake RTCPeerConnection, data channel, fetch, WebSocket and microphone: the offer sent
// to offerUrl, the messages on the "events" channel, stop, mute, trickled candidates, a connection that
// fails, and the fallback to the socket when the browser has no WebRTC or the offer is refused.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";

import { VoiceClient, supportsWebRTC } from "../../static/voice-client/v1/voice-client.js";
import { FakeWebSocket, installedForEachTest, recording } from "./fakes.mjs";

const OFFER_URL = "https://voice.example.test/realtime/webrtc/agents/a1/session?token=t";
const WS_URL = "wss://voice.example.test/ws/agents/a1/realtime?token=t";
const SESSION = {
  token: "t",
  websocketUrl: WS_URL,
  webrtc: { offerUrl: OFFER_URL, iceServers: [{ urls: ["stun:stun.example.test:3478"] }] },
};

class FakeChannel {
  constructor(label) {
    this.label = label;
    this.readyState = "connecting";
    this.sent = [];
  }
  send(data) {
    if (this.readyState !== "open") throw new Error("send() on a channel that is not open");
    this.sent.push(JSON.parse(data));
  }
  close() {
    this.readyState = "closed";
  }
  // What the server does.
  open() {
    this.readyState = "open";
    this.onopen?.({});
  }
  deliver(message) {
    this.onmessage({ data: JSON.stringify(message) });
  }
  closedByServer() {
    this.readyState = "closed";
    this.onclose?.({});
  }
}

class FakePeer {
  static made = [];
  constructor(configuration) {
    this.configuration = configuration;
    this.tracks = [];
    this.channels = [];
    this.connectionState = "new";
    this.iceGatheringState = "new";
    this.localDescription = null;
    this.remoteDescription = null;
    FakePeer.made.push(this);
  }
  addTrack(track, stream) {
    this.tracks.push({ track, stream });
  }
  createDataChannel(label) {
    const channel = new FakeChannel(label);
    this.channels.push(channel);
    return channel;
  }
  async createOffer() {
    return { type: "offer", sdp: "v=0 offer" };
  }
  async setLocalDescription(description) {
    this.localDescription = { ...description, sdp: `${description.sdp}\na=candidate:host 127.0.0.1` };
    this.iceGatheringState = "complete";
  }
  async setRemoteDescription(description) {
    if (description.sdp.includes("garbage")) throw new Error("Failed to parse SessionDescription");
    this.remoteDescription = description;
  }
  addEventListener() {}
  close() {
    this.connectionState = "closed";
  }
  fail() {
    this.connectionState = "failed";
    this.onconnectionstatechange?.();
  }
}

function track() {
  return { enabled: true, stopped: false, stop() { this.stopped = true; } };
}

const microphone = { tracks: [] };

class FakeNode {
  constructor() {
    this.port = { postMessage() {}, onmessage: null };
  }
  connect() {}
  disconnect() {}
}

class FakeAudioContext {
  constructor() {
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

let requests = [];
let answerOffer = async () => ({ status: 201, body: "v=0 answer", type: "application/sdp" });

async function fakeFetch(url, init = {}) {
  const request = { url, method: init.method || "GET", headers: init.headers || {}, body: init.body };
  requests.push(request);
  if (request.method !== "POST") return { status: 204, headers: { get: () => "" }, text: async () => "" };
  const { status, body, type } = await answerOffer(request);
  return {
    status,
    headers: { get: (name) => (name.toLowerCase() === "content-type" ? type : null) },
    text: async () => body,
    json: async () => JSON.parse(body),
  };
}

const GLOBALS = {
  WebSocket: FakeWebSocket,
  AudioContext: FakeAudioContext,
  AudioWorkletNode: FakeNode,
  RTCPeerConnection: FakePeer,
  fetch: fakeFetch,
  navigator: {
    mediaDevices: {
      async getUserMedia(constraints) {
        microphone.constraints = constraints;
        microphone.tracks = [track()];
        return { getTracks: () => microphone.tracks };
      },
    },
  },
};
installedForEachTest(GLOBALS);

beforeEach(() => {
  FakeWebSocket.opened = [];
  FakePeer.made = [];
  requests = [];
  answerOffer = async () => ({ status: 201, body: "v=0 answer", type: "application/sdp" });
});

/** A client whose WebRTC session is up: the offer answered, the channel open, session.started. */
async function liveClient(options) {
  const client = new VoiceClient(options);
  const transports = recording(client, "transport");
  await client.connect(Promise.resolve(SESSION));
  const [peer] = FakePeer.made;
  const [channel] = peer.channels;
  channel.open();
  channel.deliver({ type: "session.started", callId: "call-1" });
  assert.equal(client.state, "live");
  return { client, peer, channel, transports };
}

describe("over WebRTC", () => {
  test("the offer goes to offerUrl, the microphone on its track, the messages on the events channel", async () => {
    const { client, peer, channel, transports } = await liveClient();
    assert.equal(supportsWebRTC(), true);
    assert.deepEqual(transports, [{ transport: "webrtc", fallback: null }]);
    assert.equal(client.transport, "webrtc");
    assert.deepEqual(peer.configuration.iceServers, SESSION.webrtc.iceServers);
    assert.deepEqual(microphone.constraints.audio, {
      echoCancellation: true,
      noiseSuppression: true,
      autoGainControl: true,
      channelCount: 1,
    });
    assert.equal(peer.tracks.length, 1);
    assert.equal(peer.tracks[0].track, microphone.tracks[0]);
    assert.equal(channel.label, "events");
    const [offer] = requests;
    assert.equal(offer.url, OFFER_URL);
    assert.equal(offer.method, "POST");
    assert.equal(offer.headers["Content-Type"], "application/sdp");
    assert.match(offer.body, /a=candidate:host 127\.0\.0\.1/); // the gathered candidates are in it
    assert.deepEqual(peer.remoteDescription, { type: "answer", sdp: "v=0 answer" });
    assert.equal(FakeWebSocket.opened.length, 0);
    assert.equal(client.callId, "call-1");

    const transcripts = recording(client, "transcript");
    const clears = recording(client, "clear");
    const speech = recording(client, "speech");
    channel.deliver({ type: "agent_speech", text: "Hello there." });
    channel.deliver({ type: "clear" });
    channel.deliver({ type: "agent_speech.ended", interrupted: true });
    channel.deliver({ type: "transcript", role: "assistant", text: "Hello" });
    assert.deepEqual(clears, [{ droppedSamples: 0, queuedSamples: 0, sampleRate: null }]);
    assert.deepEqual(
      speech.map(({ speaking, interrupted }) => [speaking, interrupted]),
      [
        [true, false],
        [false, true],
      ],
    );
    assert.deepEqual(transcripts, [{ role: "assistant", text: "Hello" }]);

    assert.equal(client.sendText("A table for two"), true);
    assert.deepEqual(channel.sent, [{ type: "input_text", text: "A table for two" }]);
    // The microphone's frames raise `level` but are not sent as input_audio: the track carries them.
    client.capture.port.onmessage({ data: { type: "audio", pcm: new Int16Array(320).buffer, level: 0.1 } });
    assert.equal(channel.sent.length, 1);
  });

  test("stop() says stop on the channel; the server's close ends the call with 1000", async () => {
    const { client, peer, channel } = await liveClient();
    const closed = recording(client, "closed");
    client.stop();
    assert.deepEqual(channel.sent.at(-1), { type: "stop" });
    assert.equal(client.state, "stopping");
    assert.equal(microphone.tracks[0].stopped, true);
    channel.closedByServer();
    assert.deepEqual(closed, [{ code: 1000, reason: "The agent ended the call" }]);
    assert.equal(client.state, "closed");
    assert.equal(peer.connectionState, "closed");
  });

  test("a call the agent ends closes the client too", async () => {
    const { client, channel } = await liveClient();
    const closed = recording(client, "closed");
    channel.deliver({ type: "transfer", phoneNumber: "+14155550100" });
    channel.closedByServer();
    assert.equal(client.state, "closed");
    assert.equal(closed[0].code, 1000);
  });

  test("mute silences the microphone's track, and unmute brings it back", async () => {
    const { client } = await liveClient();
    assert.equal(client.muted, false);
    client.setMuted(true);
    assert.equal(client.muted, true);
    assert.equal(microphone.tracks[0].enabled, false);
    client.setMuted(false);
    assert.equal(microphone.tracks[0].enabled, true);
  });

  test("candidates found after the offer are trickled with PATCH once it is answered", async () => {
    let peerOf;
    answerOffer = async () => {
      // A candidate while the offer is on its way: sent once the session exists.
      [peerOf] = FakePeer.made;
      const srflx = { candidate: "candidate:srflx 203.0.113.7", sdpMid: "0", sdpMLineIndex: 0 };
      peerOf.onicecandidate({ candidate: srflx });
      return { status: 201, body: "v=0 answer", type: "application/sdp" };
    };
    const client = new VoiceClient();
    await client.connect(SESSION);
    peerOf.onicecandidate({ candidate: null });
    client.stop(); // before the channel opened: DELETE
    const patches = requests.filter((request) => request.method === "PATCH");
    assert.deepEqual(
      patches.map((request) => [request.url, request.headers["Content-Type"], JSON.parse(request.body)]),
      [
        [OFFER_URL, "application/json", { candidate: "candidate:srflx 203.0.113.7", sdpMid: "0", sdpMLineIndex: 0 }],
        [OFFER_URL, "application/json", { candidate: "" }],
      ],
    );
  });

  test("a connection that fails ends the call: an error, DELETE, and closed 1006", async () => {
    const client = new VoiceClient();
    const errors = recording(client, "error");
    const closed = recording(client, "closed");
    await client.connect(SESSION);
    FakePeer.made[0].fail();
    assert.equal(errors[0].code, "webrtc");
    assert.match(errors[0].message, /TURN/);
    assert.deepEqual(closed.map(({ code }) => code), [1006]);
    assert.deepEqual(requests.at(-1), { url: OFFER_URL, method: "DELETE", headers: {}, body: undefined });
    assert.equal(FakeWebSocket.opened.length, 0); // the token is spent: no socket with it
  });

  test("stop() before the offer is answered ends the server's session with DELETE", async () => {
    let release;
    answerOffer = () => new Promise((done) => (release = done));
    const client = new VoiceClient();
    const connecting = client.connect(SESSION);
    while (!release) await new Promise((done) => setTimeout(done, 1));
    client.stop();
    assert.equal(client.state, "closed");
    release({ status: 201, body: "v=0 answer", type: "application/sdp" });
    await connecting;
    assert.deepEqual(
      requests.map((request) => request.method),
      ["POST", "DELETE"],
    );
    assert.equal(FakePeer.made[0].connectionState, "closed");
  });
});

describe("falling back to the socket", () => {
  const used = { status: 409, body: '{"error": "Session token already used"}', type: "application/json" };
  for (const [name, refusal] of [
    ["refused with a status", async () => used],
    ["not reached", async () => Promise.reject(new TypeError("Failed to fetch"))],
    ["answered with an SDP the browser cannot take", async () => ({ ...used, status: 201, body: "garbage" })],
  ]) {
    test(`an offer ${name} falls back to websocketUrl`, async () => {
      answerOffer = refusal;
      const client = new VoiceClient();
      const transports = recording(client, "transport");
      await client.connect(SESSION);
      assert.equal(client.transport, "websocket");
      assert.equal(transports.length, 1);
      assert.equal(transports[0].transport, "websocket");
      assert.ok(transports[0].fallback, "says why");
      assert.equal(FakeWebSocket.opened[0].url, WS_URL);
      assert.equal(FakePeer.made[0].connectionState, "closed");
      assert.equal(microphone.tracks[0].stopped, false); // the socket takes the same microphone
    });
  }

  test("the refusal's message is in the fallback's reason", async () => {
    answerOffer = async () => used;
    const client = new VoiceClient();
    const transports = recording(client, "transport");
    await client.connect(SESSION);
    assert.match(transports[0].fallback, /Session token already used/);
  });

  test("a browser without WebRTC uses the socket", async () => {
    delete globalThis.RTCPeerConnection;
    const client = new VoiceClient();
    const transports = recording(client, "transport");
    await client.connect(SESSION);
    assert.equal(supportsWebRTC(), false);
    assert.deepEqual(transports, [{ transport: "websocket", fallback: "This browser has no WebRTC" }]);
    assert.equal(FakeWebSocket.opened[0].url, WS_URL);
    assert.equal(requests.length, 0);
  });

  test('transport: "websocket" never uses WebRTC; a session without webrtc uses the socket', async () => {
    const forced = new VoiceClient({ transport: "websocket" });
    await forced.connect(SESSION);
    assert.equal(forced.transport, "websocket");
    const plain = new VoiceClient();
    const transports = recording(plain, "transport");
    await plain.connect({ websocketUrl: WS_URL });
    assert.deepEqual(transports, [{ transport: "websocket", fallback: null }]);
    assert.equal(FakePeer.made.length, 0);
    assert.equal(requests.length, 0);
    assert.throws(() => new VoiceClient({ transport: "carrier-pigeon" }), /transport must be one of/);
  });

  test("the text modality uses the socket of a session answer", async () => {
    const client = new VoiceClient({ modality: "text" });
    await client.connect(Promise.resolve(SESSION));
    assert.equal(client.transport, "websocket");
    assert.equal(FakeWebSocket.opened[0].url, WS_URL);
    assert.equal(FakePeer.made.length, 0);
  });

  test("a session answer without any URL is a session error", async () => {
    const client = new VoiceClient();
    const errors = recording(client, "error");
    await client.connect({ token: "t" });
    assert.equal(errors[0].code, "session");
    assert.equal(client.state, "closed");
  });
});
