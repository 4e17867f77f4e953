// What the caller's connection is sent per read of the replica's answer. uWS sends what is written
// inside one `cork` callback in one system call, and what is written outside a cork each time it
// is written; this fake keeps that rule (a nested cork of the corked response is a plain call, as
// in uWS) and records each send. It also flags a cork with more than one data write: with the
// older uWS build, a second write that overflows the 16 KiB cork buffer can be lost when the
// socket is slow (Downstream.duringRead). A real socket cannot show the sends apart: two sends in
// quick succession usually reach the caller in one read.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HttpResponse } from 'uWebSockets.js';
import { RelayError } from '../../src/http/errors.js';
import { Downstream, type DownstreamListener } from '../../src/relay/answer/downstream.js';

class FakeResponse {
  /** Each send: what it carried, in order. */
  readonly sends: string[][] = [];
  corks = 0;
  /** Corks with more than one data write (write / tryEnd / end with a body). */
  crowdedCorks = 0;
  private corked = false;
  private dataWrites = 0;
  private pending: string[] = [];
  private head: string | undefined;

  cork(fn: () => void): this {
    if (this.corked) {
      fn();
      return this;
    }
    this.corks += 1;
    this.corked = true;
    this.dataWrites = 0;
    try {
      fn();
    } finally {
      this.corked = false;
      if (this.dataWrites > 1) this.crowdedCorks += 1;
      if (this.pending.length > 0) this.sends.push(this.pending);
      this.pending = [];
    }
    return this;
  }

  writeStatus(line: string): this {
    this.head = `status ${line}`;
    return this;
  }

  writeHeader(name: string): this {
    this.head = `${this.head ?? 'status 200 OK'} ${name}`;
    return this;
  }

  write(chunk: Buffer | string): boolean {
    this.dataWrites += 1;
    this.out(`chunk ${String(chunk)}`);
    return true;
  }

  end(body?: Buffer | string): this {
    if (body !== undefined && body.length > 0) this.dataWrites += 1;
    this.out(body === undefined || body.length === 0 ? 'end' : `end ${String(body)}`);
    return this;
  }

  tryEnd(chunk: Buffer | string, total: number): [boolean, boolean] {
    this.dataWrites += 1;
    this.out(chunk.length === total ? `end ${String(chunk)}` : `part ${String(chunk)}`);
    return [true, chunk.length === total];
  }

  getWriteOffset(): number {
    return 0;
  }

  close(): this {
    this.out('close');
    return this;
  }

  /** A first write carries the head, as uWS does. */
  private out(piece: string): void {
    const pieces = this.head === undefined ? [piece] : [this.head, piece];
    this.head = undefined;
    if (this.corked) this.pending.push(...pieces);
    else this.sends.push(pieces);
  }
}

const listener: DownstreamListener = { onCallerWritable: () => {}, onResponseEnding: () => {} };

function downstream(): { d: Downstream; res: FakeResponse } {
  const res = new FakeResponse();
  return { d: new Downstream(res as unknown as HttpResponse, 'req-1', listener), res };
}

const event = (text: string): Buffer => Buffer.from(`data: ${text}\n\n`);

test("a stream's last event and its end, brought by one read, go out in one send", () => {
  const { d, res } = downstream();
  d.begin(200, 'text/event-stream', -1, false, false);
  d.duringRead(() => d.write(event('1')));
  d.duringRead(() => {
    d.write(event('2'));
    d.write(event('[DONE]'));
    d.end();
  });
  assert.deepEqual(res.sends, [
    ['status 200 OK content-type x-request-id', 'chunk data: 1\n\n'],
    ['chunk data: 2\n\n'],
    ['chunk data: [DONE]\n\n', 'end'],
  ]);
  assert.equal(res.crowdedCorks, 0);
});

test('a read without the end: its last piece goes out when the read is over', () => {
  const { d, res } = downstream();
  d.begin(200, 'text/event-stream', -1, false, false);
  assert.equal(
    d.duringRead(() => {
      d.write(event('1'));
      assert.equal(res.sends.length, 0, 'held during the read');
    }),
    true,
  );
  assert.deepEqual(res.sends, [['status 200 OK content-type x-request-id', 'chunk data: 1\n\n']]);
});

test('outside a read, each write and the end are a send of their own', () => {
  // How the end went before `duringRead`: the last event and the end one send each.
  const { d, res } = downstream();
  d.begin(200, 'text/event-stream', -1, false, false);
  d.write(event('1'));
  d.write(event('[DONE]'));
  d.end();
  assert.equal(res.sends.length, 3);
  assert.equal(res.corks, 3);
});

test('a large last piece is not held: written at once, the end in a cork of its own', () => {
  const { d, res } = downstream();
  d.begin(200, 'application/octet-stream', -1, false, false);
  const big = Buffer.alloc(20 * 1024, 0x61);
  d.duringRead(() => {
    d.write(big);
    assert.equal(res.sends.length, 1, 'written when it came');
    d.end();
  });
  assert.equal(res.sends.length, 2);
  assert.deepEqual(res.sends[1], ['end']);
  assert.equal(res.crowdedCorks, 0);
});

test('a known-length answer in one read: its head and whole body in one send, one cork', () => {
  const { d, res } = downstream();
  d.begin(200, 'application/json', 2, false, false);
  d.duringRead(() => {
    d.write(Buffer.from('{}'));
    d.end();
  });
  assert.deepEqual(res.sends, [['status 200 OK content-type x-request-id', 'end {}']]);
  assert.equal(res.corks, 1);
});

test('a held piece goes out before the answer is cut short, and counts as relayed', () => {
  const { d, res } = downstream();
  d.begin(200, 'text/event-stream', -1, false, false);
  d.duringRead(() => {
    d.write(event('1'));
    assert.equal(d.relaying, true, 'a held piece is part of the answer: no retry elsewhere');
    d.error(new RelayError('upstream_error'), false, false);
  });
  assert.deepEqual(res.sends, [['status 200 OK content-type x-request-id', 'chunk data: 1\n\n'], ['close']]);
});

test("Sluice's own error during a read goes out once", () => {
  const { d, res } = downstream();
  d.duringRead(() => d.error(new RelayError('upstream_error'), false, false));
  assert.equal(res.sends.length, 1);
  assert.match(res.sends[0]!.join(' '), /^status 502 Bad Gateway content-type x-sluice-error x-request-id end \{/);
});

test('a caller gone during a read: the held piece is dropped, nothing is written', () => {
  const { d, res } = downstream();
  d.begin(200, 'text/event-stream', -1, false, false);
  d.duringRead(() => {
    d.write(event('1'));
    d.aborted();
  });
  assert.equal(res.sends.length, 0);
});

test('after the response ended inside a read, the rest of the read writes nothing', () => {
  const { d, res } = downstream();
  d.begin(200, 'application/json', 2, false, false);
  d.duringRead(() => {
    d.write(Buffer.from('{}'));
    d.end();
    d.write(Buffer.from('extra'));
  });
  assert.deepEqual(res.sends, [['status 200 OK content-type x-request-id', 'end {}']]);
  // A later read (a replica that sends more than it said) does not reach the caller either.
  d.duringRead(() => d.write(Buffer.from('more')));
  assert.equal(res.sends.length, 1);
});

test("a read with the head and body bytes: the head goes with them, and no comment line is added", () => {
  // The connection calls flushHead after the body pieces of the read that completed the head;
  // with a piece held, the head is not written yet, and a comment then would land inside an event.
  const { d, res } = downstream();
  d.begin(200, 'text/event-stream', -1, false, false);
  d.duringRead(() => {
    d.write(Buffer.from('data: {"tok'));
    d.flushHead();
  });
  d.duringRead(() => d.write(Buffer.from('en":1}\n\n')));
  assert.deepEqual(res.sends, [['status 200 OK content-type x-request-id', 'chunk data: {"tok'], ['chunk en":1}\n\n']]);
});

test('a head alone in its read goes out with a comment line, so the caller has the status at once', () => {
  const { d, res } = downstream();
  d.begin(200, 'text/event-stream', -1, false, false);
  d.duringRead(() => d.flushHead());
  assert.deepEqual(res.sends, [['status 200 OK content-type x-request-id', 'chunk :\n']]);
});
