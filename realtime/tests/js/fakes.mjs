// Fakes the browser voice client's tests share (realtime/tests/js/*.test.mjs): a WebSocket the test plays the
// server of, globals installed for each test and put back after it, and a recorder of a client's events.
import { afterEach, beforeEach } from "node:test";

export class FakeWebSocket {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSING = 2;
  static CLOSED = 3;
  static opened = [];

  constructor(url) {
    this.url = url;
    this.readyState = FakeWebSocket.CONNECTING;
    this.sent = [];
    FakeWebSocket.opened.push(this);
  }

  send(data) {
    if (this.readyState !== FakeWebSocket.OPEN) throw new Error("send() on a socket that is not open");
    this.sent.push(JSON.parse(data));
  }

  close(code = 1000, reason = "") {
    this.readyState = FakeWebSocket.CLOSED;
    this.onclose?.({ code, reason });
  }

  // What the server does.
  open() {
    this.readyState = FakeWebSocket.OPEN;
    this.onopen?.({});
  }

  deliver(message) {
    this.onmessage({ data: JSON.stringify(message) });
  }
}

/** Install `globals` (name -> value) on globalThis before each test of the file, and restore them after it. */
export function installedForEachTest(globals) {
  let saved = {};
  beforeEach(() => {
    saved = Object.fromEntries(Object.keys(globals).map((name) => [name, Object.getOwnPropertyDescriptor(globalThis, name)]));
    for (const [name, value] of Object.entries(globals)) {
      Object.defineProperty(globalThis, name, { value, configurable: true, writable: true });
    }
  });
  afterEach(() => {
    for (const [name, descriptor] of Object.entries(saved)) {
      if (descriptor) Object.defineProperty(globalThis, name, descriptor);
      else delete globalThis[name];
    }
  });
}

/** The details of every `name` event the client emits, in order. */
export function recording(client, name) {
  const seen = [];
  client.on(name, (detail) => seen.push(detail));
  return seen;
}
