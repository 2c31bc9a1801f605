// Pure arithmetic of the browser voice client: resampling, PCM16 conversion, base64, the playback
// queue (jitter buffer). No DOM, no Web Audio: imported by the AudioWorklet (voice-worklet.js), by the
// client (voice-client.js) and by Node's test runner (realtime/tests/js/).

/** Float samples in [-1, 1] to signed 16-bit integers (values beyond full scale are clipped). */
export function floatToPcm16(samples) {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const s = samples[i];
    // The inverse of pcm16ToFloat (exact round trip); full scale clips to 32767, NaN is silence.
    const v = Math.round(s * 32768);
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v === v ? v : 0;
  }
  return out;
}

/** Signed 16-bit integers to floats in [-1, 1). */
export function pcm16ToFloat(pcm) {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i] / 32768;
  return out;
}

/** Little-endian bytes of PCM16 samples, whatever the platform's byte order. */
export function pcm16ToBytes(pcm) {
  const bytes = new Uint8Array(pcm.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < pcm.length; i++) view.setInt16(i * 2, pcm[i], true);
  return bytes;
}

/** PCM16 samples from little-endian bytes (a trailing odd byte is ignored). */
export function bytesToPcm16(bytes) {
  const count = bytes.length >> 1;
  const out = new Int16Array(count);
  const view = new DataView(bytes.buffer, bytes.byteOffset, count * 2);
  for (let i = 0; i < count; i++) out[i] = view.getInt16(i * 2, true);
  return out;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const DECODE = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;

/** Standard base64 (with padding) of bytes. */
export function bytesToBase64(bytes) {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += ALPHABET[n >> 18] + ALPHABET[(n >> 12) & 63] + ALPHABET[(n >> 6) & 63] + ALPHABET[n & 63];
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i] << 16;
    out += ALPHABET[n >> 18] + ALPHABET[(n >> 12) & 63] + "==";
  } else if (rest === 2) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8);
    out += ALPHABET[n >> 18] + ALPHABET[(n >> 12) & 63] + ALPHABET[(n >> 6) & 63] + "=";
  }
  return out;
}

/** Bytes of standard base64 (padding optional); throws on other characters. */
export function base64ToBytes(text) {
  const clean = text.replace(/=+$/, "");
  if (clean.length % 4 === 1) throw new Error("invalid base64 length");
  const out = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let bits = 0;
  let value = 0;
  let o = 0;
  for (let i = 0; i < clean.length; i++) {
    const code = clean.charCodeAt(i);
    const d = code < 128 ? DECODE[code] : -1;
    if (d < 0) throw new Error(`invalid base64 character at ${i}`);
    value = (value << 6) | d;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (value >> bits) & 255;
    }
  }
  return out;
}

/** Root mean square of float samples (0 for none): the microphone level for meters. */
export function rms(samples) {
  if (samples.length === 0) return 0;
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
  return Math.sqrt(sum / samples.length);
}

/**
 * A level meter's fill (0..1) for an RMS level (0..1): decibels from `floorDb` (-60 dBFS: empty) to 0
 * dBFS (full), so that quiet speech still moves the meter. Silence and NaN are 0.
 */
export function meterFill(level, floorDb = -60) {
  if (!(level > 0)) return 0;
  const db = 20 * Math.log10(level);
  return Math.max(0, Math.min(1, (db - floorDb) / -floorDb));
}

// Zeroth-order modified Bessel function of the first kind (power series), for the Kaiser window.
function besselI0(x) {
  let sum = 1;
  let term = 1;
  const half = x / 2;
  for (let k = 1; k < 50; k++) {
    term *= (half / k) * (half / k);
    sum += term;
    if (term < sum * 1e-12) break;
  }
  return sum;
}

/**
 * Streaming sample-rate converter for any pair of rates (48 kHz or 44.1 kHz to 16 kHz for the
 * microphone, 24 kHz to the device rate for playback): band-limited interpolation with a
 * Kaiser-windowed sinc whose cutoff is `cutoff` (0.9) of the lower rate's Nyquist frequency, so that
 * downsampling low-passes before it decimates instead of folding high frequencies into the speech band.
 * The kernel is tabulated at `phases` fractional offsets. Positions are tracked as exact integer
 * fractions, so the output never drifts against the input.
 */
export class Resampler {
  constructor(inRate, outRate, { zeroCrossings = 16, cutoff = 0.9, beta = 8.6, phases = 256 } = {}) {
    if (!(inRate > 0 && outRate > 0) || !Number.isInteger(inRate) || !Number.isInteger(outRate)) {
      throw new Error(`sample rates must be positive integers, not ${inRate} and ${outRate}`);
    }
    this.inRate = inRate;
    this.outRate = outRate;
    this.passthrough = inRate === outRate;
    // Cutoff in cycles per input sample, and the kernel's half width in input samples.
    const fc = (0.5 * cutoff * Math.min(inRate, outRate)) / inRate;
    const half = Math.ceil(zeroCrossings / (2 * fc));
    this.half = half;
    this.taps = 2 * half;
    this.phases = phases;
    this.table = new Float32Array((phases + 1) * this.taps);
    const i0beta = besselI0(beta);
    for (let p = 0; p <= phases; p++) {
      const frac = p / phases;
      let sum = 0;
      const row = p * this.taps;
      for (let i = 0; i < this.taps; i++) {
        // Tap i multiplies input sample (n0 - half + 1 + i) for an output at n0 + frac.
        const x = frac + half - 1 - i;
        const r = x / half;
        const window = Math.abs(r) >= 1 ? 0 : besselI0(beta * Math.sqrt(1 - r * r)) / i0beta;
        const u = 2 * fc * x;
        const sinc = u === 0 ? 1 : Math.sin(Math.PI * u) / (Math.PI * u);
        const h = 2 * fc * sinc * window;
        this.table[row + i] = h;
        sum += h;
      }
      // Unit gain at 0 Hz for every phase (no phase-dependent ripple of the level).
      for (let i = 0; i < this.taps; i++) this.table[row + i] /= sum;
    }
    this.reset();
  }

  /** Forget the signal so far (after a `clear`, or between sessions). */
  reset() {
    // half - 1 samples of silence before the first input sample: output 0 is aligned with input 0.
    this.history = new Float32Array(this.half - 1);
    this.index = this.half - 1; // integer part of the next output's position in history + input
    this.acc = 0; // fractional part, in units of 1/outRate
  }

  /** Converts the next block of input; returns the output samples that it completes. */
  process(input) {
    if (this.passthrough) return Float32Array.from(input);
    const buf = new Float32Array(this.history.length + input.length);
    buf.set(this.history, 0);
    buf.set(input, this.history.length);
    const capacity = Math.ceil(((buf.length - this.index) * this.outRate) / this.inRate) + 1;
    const out = new Float32Array(Math.max(0, capacity));
    let count = 0;
    const { taps, table, phases, inRate, outRate, half } = this;
    let index = this.index;
    let acc = this.acc;
    while (index + half < buf.length) {
      const row = Math.round((acc / outRate) * phases) * taps;
      const base = index - half + 1;
      let s = 0;
      for (let i = 0; i < taps; i++) s += buf[base + i] * table[row + i];
      out[count++] = s;
      acc += inRate;
      if (acc >= outRate) {
        index += Math.floor(acc / outRate);
        acc %= outRate;
      }
    }
    const keepFrom = Math.min(index - half + 1, buf.length);
    this.history = buf.slice(keepFrom);
    this.index = index - keepFrom;
    this.acc = acc;
    return out.subarray(0, count);
  }
}

/** Cuts a stream of samples into frames of exactly `size` samples (the `input_audio` chunks). */
export class FrameChunker {
  constructor(size) {
    this.size = size;
    this.buffer = new Float32Array(size);
    this.filled = 0;
  }

  /** Adds samples; returns the frames they complete (each a new Float32Array of `size`). */
  push(samples) {
    const frames = [];
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(this.size - this.filled, samples.length - offset);
      this.buffer.set(samples.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
      if (this.filled === this.size) {
        frames.push(this.buffer);
        this.buffer = new Float32Array(this.size);
        this.filled = 0;
      }
    }
    return frames;
  }
}

/**
 * The playback queue with a small jitter buffer. Audio waits until `startSamples` are queued (or,
 * for a sound shorter than that, until it has waited `maxWaitSamples` of playback time), then plays
 * in arrival order; when it runs dry it waits for `startSamples` again. `clear()` drops everything
 * queued at once (barge-in).
 */
export class PlaybackQueue {
  constructor({ startSamples, maxWaitSamples = startSamples }) {
    this.startSamples = startSamples;
    this.maxWaitSamples = maxWaitSamples;
    this.chunks = [];
    this.offset = 0; // samples of chunks[0] already played
    this.length = 0; // samples queued and not played
    this.playing = false;
    this.waited = 0;
  }

  push(samples) {
    if (samples.length === 0) return;
    this.chunks.push(samples);
    this.length += samples.length;
  }

  /** Fills `out` (silence where nothing plays); returns how many queued samples were played. */
  pull(out) {
    if (!this.playing) {
      if (this.length === 0) {
        this.waited = 0;
      } else if (this.length >= this.startSamples || this.waited >= this.maxWaitSamples) {
        this.playing = true;
      } else {
        this.waited += out.length;
      }
      if (!this.playing) {
        out.fill(0);
        return 0;
      }
    }
    let written = 0;
    while (written < out.length && this.chunks.length > 0) {
      const chunk = this.chunks[0];
      const take = Math.min(chunk.length - this.offset, out.length - written);
      out.set(chunk.subarray(this.offset, this.offset + take), written);
      written += take;
      this.offset += take;
      if (this.offset === chunk.length) {
        this.chunks.shift();
        this.offset = 0;
      }
    }
    this.length -= written;
    if (written < out.length) {
      out.fill(0, written);
      // Ran dry: wait for a full jitter buffer again rather than stutter chunk by chunk.
      this.playing = false;
      this.waited = 0;
    }
    return written;
  }

  /** Drops every queued sample; returns how many were dropped. */
  clear() {
    const dropped = this.length;
    this.chunks = [];
    this.offset = 0;
    this.length = 0;
    this.playing = false;
    this.waited = 0;
    return dropped;
  }
}
