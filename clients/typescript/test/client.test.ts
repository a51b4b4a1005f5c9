// The client against a real `epochledger serve` on loopback (Node's own test runner):
// the server is the Python package of this repository, started by the test on a new
// SQLite ledger. EPOCHLEDGER_PYTHON names its interpreter (default: the repository's .venv).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";

import { LedgerClient, LedgerProblem } from "../src/index.js";

const PYTHON = process.env.EPOCHLEDGER_PYTHON ?? resolve(import.meta.dirname, "../../../../.venv/bin/python");

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      s.close(() => (typeof address === "object" && address ? ok(address.port) : fail(new Error("no port"))));
    });
  });
}

async function waitUntilServing(base: string, server: ChildProcess): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (server.exitCode !== null) throw new Error(`serve exited ${server.exitCode}`);
    try {
      const r = await fetch(`${base}/healthz`);
      if (r.ok) return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`serve did not answer on ${base}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("LedgerClient against a real server", () => {
  let server: ChildProcess;
  let ledger: LedgerClient;
  let base: string;
  const stderr: string[] = [];

  before(async () => {
    const store = `sqlite:///${join(mkdtempSync(join(tmpdir(), "epochledger-ts-")), "runs.db")}`;
    const init = spawnSync(PYTHON, ["-m", "epochledger", "--store", store, "init"], { encoding: "utf8" });
    assert.equal(init.status, 0, init.stderr);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    server = spawn(PYTHON, ["-m", "epochledger", "--store", store, "serve", "--listen", `127.0.0.1:${port}`], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    server.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
    await waitUntilServing(base, server);
    ledger = new LedgerClient({ baseUrl: base });
  });

  after(async () => {
    server.kill("SIGTERM");
    const code = await new Promise<number | null>((ok) => server.once("exit", (c) => ok(c)));
    assert.equal(code, 0, `serve exited ${code} on SIGTERM (rule H8): ${stderr.join("")}`);
  });

  it("boots a slot, records a run's transitions and reads them back", async () => {
    const booted = await ledger.call("boot", {
      path: { process: "ts-runs" },
      body: { booted_at: new Date().toISOString(), host: "ts-host", pid: process.pid },
    });
    const epoch = booted.epoch.epoch;
    assert.ok(epoch, "boot answers its epoch");
    await ledger.call("queue", { path: { run: "ts-1" }, body: { workflow: "nightly", labels: { team: "ts" } } });
    await ledger.call("start", { path: { run: "ts-1" }, body: { epoch } });
    await ledger.call("finish", { path: { run: "ts-1" }, body: { epoch } });
    const view = await ledger.call("run_view", { path: { run: "ts-1" } });
    assert.equal(view.state.status, "finished");
    assert.equal(view.predicates?.is_terminal, true, "the predicates of its one evaluation");
  });

  it("throws an illegal transition as a typed 409 problem naming run and status", async () => {
    await assert.rejects(
      ledger.call("start", { path: { run: "ts-1" }, body: {} }),
      (error: unknown) => {
        assert.ok(error instanceof LedgerProblem);
        assert.equal(error.status, 409);
        assert.equal(error.kind, "illegal-transition");
        assert.equal(error.problem.fields?.run, "ts-1");
        assert.equal(error.problem.fields?.status, "finished");
        return true;
      },
    );
  });

  it("throws an unknown run as 404 and a bad body as 422 naming the field", async () => {
    await assert.rejects(ledger.call("run_view", { path: { run: "no-such-run" } }), (error: unknown) => {
      assert.ok(error instanceof LedgerProblem);
      assert.equal(error.status, 404);
      assert.equal(error.kind, "run-not-found");
      return true;
    });
    await assert.rejects(
      ledger.call("boot", {
        path: { process: "ts-bad" },
        body: { booted_at: "not a time", host: "h", pid: 1 } as never,
      }),
      (error: unknown) => {
        assert.ok(error instanceof LedgerProblem);
        assert.equal(error.status, 422);
        assert.match(JSON.stringify(error.problem), /booted_at/);
        return true;
      },
    );
  });

  it("answers a retry with the same Idempotency-Key with the first outcome (rule H3)", async () => {
    const key = "ts-retry-1";
    const first = await ledger.call("queue", { path: { run: "ts-2" }, body: {} }, { idempotencyKey: key });
    const again = await ledger.call("queue", { path: { run: "ts-2" }, body: {} }, { idempotencyKey: key });
    assert.equal(first.recorded, true);
    assert.deepEqual(again.run, first.run, "the same run state");
    assert.equal(again.recorded, false, "nothing appended the second time");
  });

  it("takes an exclusive role for one live epoch, refuses another, passes it on at a stop (rule T7)", async () => {
    const boot = async (slot: string) =>
      (
        await ledger.call("boot", {
          path: { process: slot },
          body: { booted_at: new Date().toISOString(), host: "ts-host", pid: process.pid },
        })
      ).epoch.epoch;
    const [a, b] = [await boot("ts-admit-a"), await boot("ts-admit-b")];
    const granted = await ledger.call("acquire_role", { path: { role: "ts-admission" }, body: { epoch: a } });
    assert.equal(granted.recorded, true);
    assert.equal(granted.grant.token, 1);
    const kept = await ledger.call("acquire_role", { path: { role: "ts-admission" }, body: { epoch: a } });
    assert.equal(kept.already, true, "the holder asking again appends nothing");
    assert.equal(kept.grant.token, 1);
    await assert.rejects(
      ledger.call("acquire_role", { path: { role: "ts-admission" }, body: { epoch: b } }),
      (error: unknown) => {
        assert.ok(error instanceof LedgerProblem);
        assert.equal(error.status, 409);
        assert.equal(error.kind, "role-held");
        assert.equal(error.problem.fields?.holder_epoch, a);
        assert.equal(error.problem.fields?.token, 1);
        return true;
      },
    );
    const held = await ledger.call("role_holder", { path: { role: "ts-admission" } });
    assert.equal(held.grant?.epoch, a);
    assert.equal(held.live, true);
    await ledger.call("stop", { path: { epoch: a }, body: {} });
    const ended = await ledger.call("role_holder", { path: { role: "ts-admission" } });
    assert.equal(ended.live, false, "the holder's epoch stopped (O7)");
    assert.equal(ended.ended, "O2-stopped");
    const passed = await ledger.call("acquire_role", { path: { role: "ts-admission" }, body: { epoch: b } });
    assert.equal(passed.grant.token, 2, "the token only grows");
    assert.equal(passed.grant.epoch, b);
  });

  it("pages runs by cursor with no duplicate and no gap", async () => {
    for (let i = 0; i < 7; i++) await ledger.call("queue", { path: { run: `page-${i}` }, body: { labels: { page: "yes" } } });
    const seen: string[] = [];
    let cursor: string | null | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await ledger.call("list_runs", {
        query: { label: ["page=yes"], limit: 3, ...(cursor ? { after: cursor } : {}) },
      });
      seen.push(...page.runs.map((r) => r.run));
      cursor = page.next;
      if (!cursor) break;
    }
    assert.deepEqual([...seen].sort(), [0, 1, 2, 3, 4, 5, 6].map((i) => `page-${i}`));
  });

  it("streams the log from a position, in order", async () => {
    const stop = new AbortController();
    const ids: number[] = [];
    const types: string[] = [];
    try {
      for await (const event of ledger.stream({ after: 0, run: "ts-1" }, { signal: stop.signal })) {
        ids.push(Number(event.id));
        types.push(String((event.data as { type?: string }).type));
        if (types.includes("run.finished")) break;
      }
    } finally {
      stop.abort();
    }
    assert.deepEqual(types, ["run.queued", "run.started", "run.finished"]);
    assert.deepEqual([...ids].sort((a, b) => a - b), ids, "in log order");
  });
});
