// The browser voice client's handling of server messages and microphone levels
// (realtime/static/voice-client/v1/voice-client.js), under Node's test runner: the messages go in as
// the socket would deliver them (JSON text), the events come out as a page sees them. No audio graph
// or socket is needed for these paths.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { rms } from "../../static/voice-client/v1/audio-math.js";
import { VoiceClient, meterFill } from "../../static/voice-client/v1/voice-client.js";

function recording(client, name) {
  const seen = [];
  client.on(name, (detail) => seen.push(detail));
  return seen;
}

function receive(client, message) {
  client.onMessage(JSON.stringify(message));
}

describe("the agent's words as it speaks them", () => {
  test("each agent_speech is the sentence starting now; the answer grows until agent_speech.ended", () => {
    const client = new VoiceClient();
    const speech = recording(client, "speech");
    assert.equal(client.speaking, false);
    receive(client, { type: "agent_speech", text: "Just so you know, you are speaking with an AI." });
    assert.equal(client.speaking, true);
    assert.equal(client.speechText, "Just so you know, you are speaking with an AI.");
    receive(client, { type: "agent_speech", text: "How can I help?" });
    receive(client, { type: "agent_speech.ended", interrupted: false });
    assert.deepEqual(speech, [
      {
        speaking: true,
        text: "Just so you know, you are speaking with an AI.",
        answer: "Just so you know, you are speaking with an AI.",
        interrupted: false,
      },
      {
        speaking: true,
        text: "How can I help?",
        answer: "Just so you know, you are speaking with an AI. How can I help?",
        interrupted: false,
      },
      {
        speaking: false,
        text: "",
        answer: "Just so you know, you are speaking with an AI. How can I help?",
        interrupted: false,
      },
    ]);
    assert.equal(client.speaking, false);
    assert.equal(client.speechText, "");
  });

  test("the next answer starts afresh, and a barge-in ends it as interrupted", () => {
    const client = new VoiceClient();
    const speech = recording(client, "speech");
    receive(client, { type: "agent_speech", text: "Hello." });
    receive(client, { type: "agent_speech.ended", interrupted: false });
    receive(client, { type: "agent_speech", text: "Let me tell you everything." });
    receive(client, { type: "clear" });
    receive(client, { type: "agent_speech.ended", interrupted: true });
    assert.deepEqual(
      speech.slice(2).map(({ speaking, answer, interrupted }) => [speaking, answer, interrupted]),
      [
        [true, "Let me tell you everything.", false],
        [false, "Let me tell you everything.", true],
      ],
    );
  });

  test("an ended cue without speech, or a caption without text, raises nothing", () => {
    const client = new VoiceClient();
    const speech = recording(client, "speech");
    receive(client, { type: "agent_speech.ended", interrupted: true });
    receive(client, { type: "agent_speech", text: "" });
    receive(client, { type: "agent_speech" });
    assert.deepEqual(speech, []);
    assert.equal(client.speaking, false);
  });

  test("a call that ends while the agent speaks ends its speech as interrupted", () => {
    const client = new VoiceClient();
    const speech = recording(client, "speech");
    const closed = recording(client, "closed");
    receive(client, { type: "agent_speech", text: "One moment." });
    client.onClose(1000, "conversation ended");
    assert.deepEqual(speech.at(-1), { speaking: false, text: "", answer: "One moment.", interrupted: true });
    assert.deepEqual(closed, [{ code: 1000, reason: "conversation ended" }]);
  });

  test("the transcript still arrives as before", () => {
    const client = new VoiceClient();
    const transcripts = recording(client, "transcript");
    receive(client, { type: "agent_speech", text: "Hello." });
    receive(client, { type: "agent_speech.ended", interrupted: false });
    receive(client, { type: "transcript", role: "assistant", text: "Hello." });
    assert.deepEqual(transcripts, [{ role: "assistant", text: "Hello." }]);
  });
});

describe("tool calls", () => {
  test("a finished tool says how it went, and why a failed one failed", () => {
    const client = new VoiceClient();
    const tools = recording(client, "tool");
    receive(client, { type: "tool.started", name: "lookup_order" });
    receive(client, {
      type: "tool.finished",
      name: "lookup_order",
      status: "error",
      error: "The tool answered HTTP 500",
    });
    receive(client, { type: "tool.finished", name: "search_knowledge", status: "success" });
    receive(client, { type: "tool.finished", name: "older_server" });
    assert.deepEqual(tools, [
      { name: "lookup_order", phase: "started" },
      { name: "lookup_order", phase: "finished", status: "error", error: "The tool answered HTTP 500" },
      { name: "search_knowledge", phase: "finished", status: "success", error: null },
      { name: "older_server", phase: "finished", status: null, error: null },
    ]);
  });
});

describe("the microphone level", () => {
  test("meterFill maps -60..0 dBFS onto 0..1", () => {
    assert.equal(meterFill(1), 1);
    assert.equal(meterFill(0.001), 0); // -60 dBFS
    assert.ok(Math.abs(meterFill(0.01) - 1 / 3) < 1e-12); // -40 dBFS
    assert.ok(Math.abs(meterFill(0.1) - 2 / 3) < 1e-12); // -20 dBFS
    assert.equal(meterFill(0.0001), 0); // below the floor
    assert.equal(meterFill(0), 0);
    assert.equal(meterFill(Number.NaN), 0);
    assert.equal(meterFill(2), 1); // beyond full scale
    assert.ok(Math.abs(meterFill(0.01, -80) - 0.5) < 1e-12);
  });

  test("each captured frame raises `level` with its RMS and meter fill, and is kept as micLevel", () => {
    const client = new VoiceClient();
    const levels = recording(client, "level");
    const frame = new Float32Array(320);
    for (let i = 0; i < frame.length; i++) frame[i] = 0.1 * Math.sin((2 * Math.PI * 440 * i) / 16000);
    const level = rms(frame);
    client.onCaptured({ type: "audio", pcm: new Int16Array(320).buffer, level });
    client.onCaptured({ type: "audio", pcm: new Int16Array(320).buffer, level: 0 });
    assert.ok(Math.abs(level - 0.1 / Math.SQRT2) < 1e-3);
    assert.deepEqual(levels, [
      { rms: level, meter: meterFill(level) },
      { rms: 0, meter: 0 },
    ]);
    assert.ok(levels[0].meter > 0.6 && levels[0].meter < 0.7); // about -23 dBFS
    assert.equal(client.micLevel, 0);
  });
});

describe("a barge-in's clear", () => {
  // The playback worklet's port: what the client posts to it; its answers come back through onPlayback.
  function withPlayback(client) {
    const posted = [];
    client.playback = { port: { postMessage: (message) => posted.push(message) } };
    return posted;
  }

  test("what comes after a clear is raised after it, once the worklet has dropped its queue", () => {
    const client = new VoiceClient();
    const posted = withPlayback(client);
    const events = [];
    client.on("clear", ({ droppedSamples }) => events.push(["clear", droppedSamples]));
    client.on("speech", ({ speaking }) => events.push(["speech", speaking]));
    client.on("transcript", ({ role, text }) => events.push(["transcript", role, text]));
    receive(client, { type: "agent_speech", text: "Let me tell you everything." });
    // On a busy machine the caller's turn can end as the barge-in cuts the agent: all at once.
    receive(client, { type: "clear" });
    receive(client, { type: "agent_speech.ended", interrupted: true });
    receive(client, { type: "transcript", role: "assistant", text: "Let me" });
    receive(client, { type: "transcript", role: "user", text: "I would like to book a table" });
    assert.deepEqual(posted, [{ type: "clear" }]);
    assert.deepEqual(events, [["speech", true]]);
    client.onPlayback({ type: "cleared", dropped: 4800, queued: 0, sampleRate: 48000 });
    assert.deepEqual(events, [
      ["speech", true],
      ["clear", 4800],
      ["speech", false],
      ["transcript", "assistant", "Let me"],
      ["transcript", "user", "I would like to book a table"],
    ]);
    receive(client, { type: "transcript", role: "assistant", text: "Sure." });
    assert.deepEqual(events.at(-1), ["transcript", "assistant", "Sure."]);
  });

  test("a clear among the held messages holds the rest again", () => {
    const client = new VoiceClient();
    const posted = withPlayback(client);
    const events = [];
    client.on("clear", () => events.push("clear"));
    client.on("transcript", ({ text }) => events.push(text));
    receive(client, { type: "clear" });
    receive(client, { type: "transcript", role: "user", text: "one" });
    receive(client, { type: "clear" });
    receive(client, { type: "transcript", role: "user", text: "two" });
    client.onPlayback({ type: "cleared", dropped: 0, queued: 0, sampleRate: 48000 });
    assert.deepEqual(events, ["clear", "one"]);
    assert.equal(posted.length, 2);
    client.onPlayback({ type: "cleared", dropped: 0, queued: 0, sampleRate: 48000 });
    assert.deepEqual(events, ["clear", "one", "clear", "two"]);
  });

  test("a call that closes before the worklet answers still raises what was held, before closed", () => {
    const client = new VoiceClient();
    withPlayback(client);
    const events = [];
    client.on("clear", () => events.push("clear"));
    client.on("transcript", ({ text }) => events.push(text));
    client.on("closed", () => events.push("closed"));
    receive(client, { type: "clear" });
    receive(client, { type: "transcript", role: "user", text: "goodbye" });
    client.onClose(1000, "conversation ended");
    assert.deepEqual(events, ["clear", "goodbye", "closed"]);
  });
});
