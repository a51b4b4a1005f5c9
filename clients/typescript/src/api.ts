// Generated from docs/openapi.json by scripts/generate.mjs: do not edit by hand.
// `make ts-client` regenerates it; CI fails when it is stale.

export interface AuditTable {
  columns: string[];
  rows: unknown[][];
}

export interface Beat {
  at: string;
  node: string;
  ref: string;
}

export interface BootBody {
  booted_at: string;
  host: string;
  pid: number;
  epoch?: string | null;
  actor?: string | null;
  host_boot?: string | null;
  pid_start?: number | null;
  machine?: string | null;
}

export interface CancelBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
}

export interface CancelledFrom {
  status: Status;
  code?: string;
  error?: string | null;
  cause?: Cause | null;
  reason?: string | null;
}

export interface Cause {
  code?: string;
  message?: string | null;
  cause?: Cause | null;
}

export interface ChainReport {
  chained: boolean;
  events?: number;
  links?: number;
  position?: number;
  hash?: string;
  digests?: Digest[];
  failure?: Failure | null;
}

export interface Checkpoint {
  ref: string;
  node?: string | null;
}

export interface CheckpointBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
  epoch?: string | null;
  node: string;
  ref: string;
}

export interface CorrectBody {
  to: Status;
  actor: string;
  reason: string;
  code?: string;
  error?: string | null;
  at?: string | null;
}

export interface DamagedRun {
  run: string;
  position: number;
  tag?: string | null;
  error: string;
}

export interface DeadLetterRow {
  run: string;
  at: string;
  position: number;
  tick: string;
  step: string;
  error_class: string;
  error: string;
  failing_since: string;
  failures: number;
  deadline_s: number;
  cleanup_error?: string | null;
}

export interface DeleteBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
}

export interface Digest {
  position: number;
  hash: string;
  at: string;
}

export interface EpochLiveness {
  epoch: EpochState;
  live: boolean;
  ended?: string | null;
  why?: string | null;
}

export interface EpochState {
  process: string;
  epoch: string;
  booted_at: string;
  recorded_at: string;
  host?: string | null;
  pid?: number | null;
  host_boot?: string | null;
  pid_start?: number | null;
  machine?: string | null;
  superseded_by?: string | null;
  superseded_at?: string | null;
  stopping_at?: string | null;
  stopped_at?: string | null;
  exited_at?: string | null;
  exited_by?: string | null;
  exit_code?: number | null;
  exit_signal?: number | null;
  exit_evidence?: string | null;
  sweep_skipped?: string | null;
  sweep_failed_at?: string | null;
  retired_at?: string | null;
}

export interface EpochWritten {
  epoch: EpochState;
  recorded: boolean;
  already: boolean;
}

export interface ExitedBody {
  observed_by: string;
  exit_code?: number | null;
  signal?: number | null;
  evidence?: string | null;
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
}

export interface FailBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
  epoch?: string | null;
  code: string;
  resumable: boolean;
  error?: string | null;
  cause?: Cause | null;
}

export interface Failure {
  kind: string;
  position: number;
  message: string;
  stream?: string | null;
  version?: number | null;
}

export interface FencedEnd {
  epoch: string;
  refused: string;
  reported: Status;
  at: string;
}

export interface Finding {
  process: string;
  epoch: string;
  verdict: string;
  pid?: number | null;
  evidence?: string | null;
}

export interface FinishBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
  epoch?: string | null;
}

export interface FleetState {
  position: number;
  at: string | null;
  events: number;
  views: { [key: string]: unknown; };
  parked: { [key: string]: number[]; };
}

export interface Health {
  status: string;
}

export interface HistoryEntry {
  position: number;
  version: number;
  from_status: string | null;
  label: string;
  event?: RunQueued | RunStarted | RunCheckpointed | RunPaused | RunResumed | RunFailed | RunCancelled | RunFinished | RunRewound | RunDeleted | RunCorrected | RunTickFailed | RunTickRecovered | RunDeadLettered | RunRecovered | RunFenced | RunImported | ProcessBooted | ProcessStopping | ProcessStopped | ProcessExited | ProcessSweepSkipped | ProcessSweepFailed | ProcessRetired | LedgerDefaultSlot | RoleGranted | PassItemFailed | PassItemRecovered | PassItemRetired | IdempotencyKept | TokenIssued | TokenRevoked | null;
  poison?: Poison | null;
}

export interface IdempotencyKept {
  at: string;
  actor?: string | null;
  reason?: string | null;
  key: string;
  fingerprint: string;
  status: number;
  body: string;
  type: "idempotency.kept";
}

export interface IssuedToken {
  secret: string;
  token: Token;
}

export interface LedgerDefaultSlot {
  at: string;
  actor?: string | null;
  reason?: string | null;
  slot?: string | null;
  type: "ledger.default_slot";
}

export interface ListedRun {
  run: string;
  status: Status;
  code?: string;
  error?: string | null;
  cause?: Cause | null;
  workflow?: string | null;
  process?: string | null;
  epoch?: string | null;
  checkpoint?: Checkpoint | null;
  interaction?: string | null;
  questions?: string[] | null;
  answers?: { [key: string]: string; } | null;
  queued_at: string;
  started_at?: string | null;
  updated_at: string;
  actor?: string | null;
  reason?: string | null;
  version?: number;
  deleted?: boolean;
  corrections?: number;
  tick_streak?: TickStreak | null;
  slot_epoch?: string | null;
  fenced?: number;
  fenced_end?: FencedEnd | null;
  labels?: { [key: string]: string; };
  parent?: string | null;
  cancelled_from?: CancelledFrom | null;
  queued_process?: string | null;
  attempt?: number;
  source?: string | null;
  source_status?: string | null;
  code_shown?: string;
  predicates?: { [key: string]: boolean; };
}

export interface OpenStreak {
  age_s: number | null;
  error: string;
  error_class: string;
  failures: number;
  last_at: string;
  run: string;
  since: string;
  step: string;
  tick: string;
}

export interface Orphaned {
  state: RunState;
  verdict?: Verdict | null;
  unjudged?: Unjudged | null;
}

export interface PassItemFailed {
  at: string;
  actor?: string | null;
  reason?: string | null;
  name: string;
  item: string;
  tick: string;
  epoch?: string | null;
  error_class: string;
  error?: string;
  deliveries: number;
  type: "pass.item_failed";
}

export interface PassItemRecovered {
  at: string;
  actor?: string | null;
  reason?: string | null;
  name: string;
  item: string;
  tick: string;
  epoch?: string | null;
  type: "pass.item_recovered";
}

export interface PassItemRetired {
  at: string;
  actor?: string | null;
  reason?: string | null;
  name: string;
  item: string;
  tick: string;
  epoch?: string | null;
  error_class: string;
  error?: string;
  deliveries: number;
  ceiling: number;
  type: "pass.item_retired";
}

export interface PauseBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
  epoch?: string | null;
  kind: "operator" | "waiting_human";
  interaction?: string | null;
  questions?: string[] | null;
}

export interface Poison {
  position: number;
  stream: string;
  version: number;
  tag: string | null;
  error: string;
}

export interface ProbeBody {
  epoch?: string | null;
  sweep?: boolean;
}

export interface ProbeReport {
  host: string;
  host_boot: string | null;
  observed_by: string;
  findings?: Finding[];
  exited?: number;
  swept_by?: string | null;
  sweep?: SweepReport | null;
  retired?: string[];
}

export interface ProcessBooted {
  at: string;
  actor?: string | null;
  reason?: string | null;
  process: string;
  epoch: string;
  booted_at: string;
  host?: string | null;
  pid?: number | null;
  host_boot?: string | null;
  pid_start?: number | null;
  machine?: string | null;
  type: "process.booted";
}

export interface ProcessExited {
  at: string;
  actor?: string | null;
  reason?: string | null;
  process: string;
  epoch: string;
  observed_by: string;
  exit_code?: number | null;
  signal?: number | null;
  evidence?: string | null;
  type: "process.exited";
}

export interface ProcessRetired {
  at: string;
  actor?: string | null;
  reason?: string | null;
  process: string;
  epoch: string;
  type: "process.retired";
}

export interface ProcessStopped {
  at: string;
  actor?: string | null;
  reason?: string | null;
  process: string;
  epoch: string;
  type: "process.stopped";
}

export interface ProcessStopping {
  at: string;
  actor?: string | null;
  reason?: string | null;
  process: string;
  epoch: string;
  type: "process.stopping";
}

export interface ProcessSweepFailed {
  at: string;
  actor?: string | null;
  reason?: string | null;
  process: string;
  epoch: string;
  attempts: number;
  error: string;
  type: "process.sweep_failed";
}

export interface ProcessSweepSkipped {
  at: string;
  actor?: string | null;
  reason?: string | null;
  process: string;
  epoch: string;
  why: string;
  now?: string | null;
  booted_at?: string | null;
  type: "process.sweep_skipped";
}

export interface QueueBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
  workflow?: string | null;
  process?: string | null;
  labels?: { [key: string]: string; } | null;
  parent?: string | null;
}

export interface Ready {
  status: string;
  head: number;
  max_lag: number;
  bound: number;
}

export interface ReplayedDocument {
  state: FleetState;
  state_hash: string;
}

export interface ResumeBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
  by: "operator" | "auto";
  answers?: { [key: string]: string; } | null;
}

export interface RewindBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
  to_ref?: string | null;
}

export interface RoleGranted {
  at: string;
  actor?: string | null;
  reason?: string | null;
  role: string;
  epoch: string;
  process: string;
  token?: number;
  previous_epoch?: string | null;
  previous_process?: string | null;
  previous_token?: number | null;
  previous_rule?: string | null;
  previous_evidence?: string | null;
  type: "role.granted";
}

export interface RunCancelled {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  type: "run.cancelled";
}

export interface RunCheckpointed {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  node: string;
  ref: string;
  epoch?: string | null;
  type: "run.checkpointed";
}

export interface RunCorrected {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  to: Status;
  error?: string | null;
  type: "run.corrected";
}

export interface RunDeadLettered {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  tick: string;
  step: string;
  error_class: string;
  error?: string;
  failing_since: string;
  failures: number;
  deadline_s: number;
  cleanup_error?: string | null;
  epoch?: string | null;
  type: "run.dead_lettered";
}

export interface RunDeleted {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  type: "run.deleted";
}

export interface RunFailed {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  resumable: boolean;
  error?: string | null;
  cause?: Cause | null;
  epoch?: string | null;
  type: "run.failed";
}

export interface RunFenced {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  epoch: string;
  refused: string;
  why: string;
  superseded_by?: string | null;
  stopped_at?: string | null;
  report?: { [key: string]: unknown; };
  reported?: Status | null;
  rule?: string | null;
  type: "run.fenced";
}

export interface RunFinished {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  epoch?: string | null;
  type: "run.finished";
}

export interface RunImported {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  source: string;
  cursor: number;
  source_status?: string | null;
  source_updated?: string | null;
  type: "run.imported";
}

export interface RunPage {
  runs: ListedRun[];
  lag: number;
  next?: string | null;
}

export interface RunPaused {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  kind: "operator" | "waiting_human";
  interaction?: string | null;
  questions?: string[] | null;
  epoch?: string | null;
  type: "run.paused";
}

export interface RunQueued {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  workflow?: string | null;
  process?: string | null;
  labels?: { [key: string]: string; };
  parent?: string | null;
  type: "run.queued";
}

export interface RunRecovered {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  rule: string;
  swept_by: string;
  swept_by_process: string;
  owner_process?: string | null;
  owner_epoch?: string | null;
  superseded_by?: string | null;
  stopped_at?: string | null;
  started_at?: string | null;
  booted_at?: string | null;
  cutoff?: string | null;
  margin?: number | null;
  exited_at?: string | null;
  observed_by?: string | null;
  exit_code?: number | null;
  signal?: number | null;
  host?: string | null;
  host_boot?: string | null;
  rebooted_to?: string | null;
  rebooted_by?: string | null;
  evidence?: string | null;
  type: "run.recovered";
}

export interface RunResumed {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  by: "operator" | "auto";
  answers?: { [key: string]: string; } | null;
  type: "run.resumed";
}

export interface RunRewound {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  to_ref?: string | null;
  type: "run.rewound";
}

export interface RunStarted {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  epoch?: string | null;
  process?: string | null;
  slot_epoch?: string | null;
  type: "run.started";
}

export interface RunState {
  run: string;
  status: Status;
  code?: string;
  error?: string | null;
  cause?: Cause | null;
  workflow?: string | null;
  process?: string | null;
  epoch?: string | null;
  checkpoint?: Checkpoint | null;
  interaction?: string | null;
  questions?: string[] | null;
  answers?: { [key: string]: string; } | null;
  queued_at: string;
  started_at?: string | null;
  updated_at: string;
  actor?: string | null;
  reason?: string | null;
  version?: number;
  deleted?: boolean;
  corrections?: number;
  last?: RunQueued | RunStarted | RunCheckpointed | RunPaused | RunResumed | RunFailed | RunCancelled | RunFinished | RunRewound | RunDeleted | RunCorrected | RunTickFailed | RunTickRecovered | RunDeadLettered | RunRecovered | RunFenced | RunImported | null;
  tick_streak?: TickStreak | null;
  slot_epoch?: string | null;
  fenced?: number;
  fenced_end?: FencedEnd | null;
  labels?: { [key: string]: string; };
  parent?: string | null;
  cancelled_from?: CancelledFrom | null;
  queued_process?: string | null;
  attempt?: number;
  source?: string | null;
  source_status?: string | null;
}

export interface RunTickFailed {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  tick: string;
  step: string;
  error_class: string;
  error?: string;
  epoch?: string | null;
  type: "run.tick_failed";
}

export interface RunTickHealth {
  dead_letters: DeadLetterRow[];
  ledger_now: string | null;
  streak: OpenStreak | null;
}

export interface RunTickRecovered {
  at: string;
  actor?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  code?: string;
  tick: string;
  epoch?: string | null;
  type: "run.tick_recovered";
}

export interface RunView {
  state: RunState;
  lag: number;
  tick_health: RunTickHealth;
  code_shown?: string;
  predicates?: { [key: string]: boolean; };
  children?: string[];
}

export interface StartBody {
  actor?: string | null;
  reason?: string | null;
  at?: string | null;
  epoch?: string | null;
  process?: string | null;
}

export interface StartupBody {
  booted_at: string;
  host: string;
  pid: number;
  epoch?: string | null;
  actor?: string | null;
  host_boot?: string | null;
  pid_start?: number | null;
  machine?: string | null;
  margin?: number | null;
  new_slot?: boolean;
}

export interface StartupWritten {
  epoch: EpochState;
  report: SweepReport;
}

/** The eight statuses of a run. Which status answers which policy question lives in */
export type Status = "queued" | "running" | "paused_operator" | "paused_waiting_human" | "failed_resumable" | "failed" | "cancelled" | "finished";

export interface StopBody {
  actor?: string | null;
  reason?: string | null;
}

export interface Streaking {
  state: RunState;
  streak: { [key: string]: unknown; };
}

export interface StreakingRuns {
  runs: Streaking[];
  lag: number;
}

export interface SweepBody {
  margin?: number | null;
}

export interface SweepReport {
  process: string;
  epoch: string;
  outcome: string;
  recovered?: Verdict[];
  fallback_skipped?: string | null;
  attempts?: number;
  conflict_rounds?: number;
  damaged?: DamagedRun[];
  unjudged?: Unjudged[];
}

export interface TickHealth {
  now: string | null;
  open_streaks: { [key: string]: unknown; }[];
  dead_letters: number;
  dead_letters_by_step: { [key: string]: number; };
  dead_letters_by_error_class: { [key: string]: number; };
}

export interface TickStreak {
  since: string;
  failures: number;
  last_at: string;
  tick: string;
  step: string;
  error_class: string;
  error?: string;
}

export interface Token {
  id: string;
  role: string;
  name?: string | null;
  slots?: string[];
  issued_at: string;
  issued_by?: string | null;
  revoked_at?: string | null;
  revoked_by?: string | null;
}

export interface TokenIssued {
  at: string;
  actor?: string | null;
  reason?: string | null;
  token: string;
  role: string;
  digest: string;
  name?: string | null;
  slots?: string[];
  type: "token.issued";
}

export interface TokenRequest {
  role: string;
  name?: string | null;
  slots?: string[];
  reason?: string | null;
}

export interface TokenRevoked {
  at: string;
  actor?: string | null;
  reason?: string | null;
  token: string;
  type: "token.revoked";
}

export interface Unjudged {
  run: string;
  rule?: string;
  started_at?: string | null;
  epoch?: string | null;
}

export interface Verdict {
  run: string;
  rule: string;
  owner_process?: string | null;
  owner_epoch?: string | null;
  superseded_by?: string | null;
  stopped_at?: string | null;
  exited_at?: string | null;
  observed_by?: string | null;
  exit_code?: number | null;
  signal?: number | null;
  host?: string | null;
  host_boot?: string | null;
  rebooted_to?: string | null;
  rebooted_by?: string | null;
  evidence?: string | null;
  started_at?: string | null;
  relative_to?: string | null;
  default_slot?: string | null;
  booted_at?: string | null;
  cutoff?: string | null;
  margin?: number | null;
}

export interface Verification {
  chain: ChainReport;
  views: Verified[];
}

export interface Verified {
  view: string;
  position: number;
  rows: number;
  parked: number;
  built?: boolean;
  difference?: verify_Difference | null;
}

export interface WhatIf {
  policy: string;
  position: number;
  at: string | null;
  sweeps: number;
  differences: whatif_Difference[];
}

export interface verify_Difference {
  view: string;
  key?: string | null;
  column?: string | null;
  live?: unknown;
  replay?: unknown;
  message: string;
}

export interface whatif_Difference {
  kind: string;
  run: string;
  sweep_process: string;
  sweep_epoch: string;
  position: number;
  at: string;
  owner_process?: string | null;
  owner_epoch?: string | null;
  owner_live?: boolean | null;
  started_at?: string | null;
  age_s?: number | null;
  last_checkpoint?: Beat | null;
  alternative?: Verdict | null;
  recorded_rule?: string | null;
  found_at?: string | null;
  found_by?: string | null;
  running_for_s?: number | null;
  until?: string | null;
  until_why?: string | null;
  then?: string | null;
  message?: string;
}

/** Every operation of the service: what it takes (`args`) and what it answers. */
export interface Operations {
  /** Asynccallable: POST /v1/tokens */
  AsyncCallable: {
    args: {
    body: TokenRequest;
    };
    answer: IssuedToken;
  };
  /** Read-only audit SQL: GET /v1/audit/query */
  auditQuery: {
    args: {
    query: { sql: string; timeout?: number | null; memory_limit?: string | null };
    };
    answer: AuditTable;
  };
  /** A canned audit report: GET /v1/audit/reports/{name} */
  auditReport: {
    args: {
    path: { name: string };
    query?: { as_of?: string | null; period?: string; label?: string | null; timeout?: number | null; memory_limit?: string | null };
    };
    answer: AuditTable;
  };
  /** Record that an epoch has begun to stop (process.stopping): POST /v1/epochs/{epoch}/begin-stop */
  begin_stop: {
    args: {
    path: { epoch: string };
    body: StopBody;
    };
    answer: EpochWritten;
  };
  /** Boot a new epoch of a process slot (rule O1): POST /v1/processes/{process}/boot */
  boot: {
    args: {
    path: { process: string };
    body: BootBody;
    };
    answer: EpochWritten;
  };
  /** Cancel a run: POST /v1/runs/{run}/cancel */
  cancel: {
    args: {
    path: { run: string };
    body: CancelBody;
    };
    answer: unknown;
  };
  /** Record a checkpoint: POST /v1/runs/{run}/checkpoint */
  checkpoint: {
    args: {
    path: { run: string };
    body: CheckpointBody;
    };
    answer: unknown;
  };
  /** Correct a final run's verdict (audited): POST /v1/runs/{run}/correct */
  correct: {
    args: {
    path: { run: string };
    body: CorrectBody;
    };
    answer: unknown;
  };
  /** Delete a run (its history stays): POST /v1/runs/{run}/delete */
  delete: {
    args: {
    path: { run: string };
    body: DeleteBody;
    };
    answer: unknown;
  };
  /** Epochs with their liveness facts: GET /v1/epochs */
  epochLiveness: {
    args: {
    query?: { process?: string | null; live?: boolean; retired?: boolean };
    };
    answer: EpochLiveness[];
  };
  /** Record that an epoch's process exited, as whoever saw it (rule O7): POST /v1/processes/{process}/epochs/{epoch}/exited */
  exited: {
    args: {
    path: { process: string; epoch: string };
    body: ExitedBody;
    };
    answer: EpochWritten;
  };
  /** Record a failure with its code: POST /v1/runs/{run}/fail */
  fail: {
    args: {
    path: { run: string };
    body: FailBody;
    };
    answer: unknown;
  };
  /** Record that a run finished: POST /v1/runs/{run}/finish */
  finish: {
    args: {
    path: { run: string };
    body: FinishBody;
    };
    answer: unknown;
  };
  /** HandleSchemaPathNotFound: GET /openapi/{path} */
  handleSchemaPathNotFound: {
    args: {
    path: { path: string };
    };
    answer: unknown;
  };
  /** Alive: answers without touching the store (rule H7): GET /healthz */
  healthz: {
    args: { };
    answer: Health;
  };
  /** A run's history: GET /v1/runs/{run}/history */
  historyOf: {
    args: {
    path: { run: string };
    };
    answer: HistoryEntry[];
  };
  /** Runs, filtered, one page: GET /v1/runs */
  listRuns: {
    args: {
    query?: { status?: Status[] | null; predicate?: string[] | null; code?: string[] | null; label?: string[] | null; process?: string[] | null; parent?: string[] | null; after?: string | null; limit?: number };
    };
    answer: RunPage;
  };
  /** ListTokens: GET /v1/tokens */
  listTokens: {
    args: { };
    answer: Token[];
  };
  /** Prometheus metrics (rule H7): GET /metrics */
  metricsRoute: {
    args: { };
    answer: string;
  };
  /** Handler: GET /openapi/elements */
  OpenapiElementsHandler: {
    args: { };
    answer: string;
  };
  /** Handler: GET /openapi */
  OpenapiHandler: {
    args: { };
    answer: string;
  };
  /** Handler: GET /openapi/openapi.json */
  OpenapiOpenapiJsonHandler: {
    args: { };
    answer: string;
  };
  /** Handler: GET /openapi/openapi.yaml */
  OpenapiOpenapiYamlHandler: {
    args: { };
    answer: string;
  };
  /** Handler: GET /openapi/openapi.yml */
  OpenapiOpenapiYmlHandler: {
    args: { };
    answer: string;
  };
  /** Handler: GET /openapi/rapidoc */
  OpenapiRapidocHandler: {
    args: { };
    answer: string;
  };
  /** Handler: GET /openapi/redoc */
  OpenapiRedocHandler: {
    args: { };
    answer: string;
  };
  /** Handler: GET /openapi/swagger */
  OpenapiSwaggerHandler: {
    args: { };
    answer: string;
  };
  /** Orphans and unjudged runs: GET /v1/orphans */
  orphaned: {
    args: {
    query?: { status?: Status[] | null; predicate?: string[] | null; code?: string[] | null; label?: string[] | null };
    };
    answer: Orphaned[];
  };
  /** Pause a run (operator, or waiting on a human): POST /v1/runs/{run}/pause */
  pause: {
    args: {
    path: { run: string };
    body: PauseBody;
    };
    answer: unknown;
  };
  /** Probe this server's host's live epochs against its kernel, then sweep (rules O7, O8): POST /v1/probe */
  probe: {
    args: {
    body: ProbeBody;
    };
    answer: ProbeReport;
  };
  /** Queue a new run: POST /v1/runs/{run}/queue */
  queue: {
    args: {
    path: { run: string };
    body: QueueBody;
    };
    answer: unknown;
  };
  /** Ready: the store answers and the views are caught up (rule H7): GET /readyz */
  readyz: {
    args: { };
    answer: Ready | unknown;
  };
  /** RenderOauth2Redirect: GET /openapi/oauth2-redirect.html */
  renderOauth2Redirect: {
    args: { };
    answer: string;
  };
  /** The fleet at a position or an instant, with its state hash: GET /v1/replay */
  replay: {
    args: {
    query?: { position?: number | null; at?: string | null; by?: "log" | "event-time" };
    };
    answer: ReplayedDocument;
  };
  /** Resume a paused or resumable run: POST /v1/runs/{run}/resume */
  resume: {
    args: {
    path: { run: string };
    body: ResumeBody;
    };
    answer: unknown;
  };
  /** RevokeToken: DELETE /v1/tokens/{token} */
  revokeToken: {
    args: {
    path: { token: string };
    };
    answer: Token;
  };
  /** Rewind a run to a checkpoint: POST /v1/runs/{run}/rewind */
  rewind: {
    args: {
    path: { run: string };
    body: RewindBody;
    };
    answer: unknown;
  };
  /** One run: GET /v1/runs/{run} */
  runView: {
    args: {
    path: { run: string };
    };
    answer: RunView;
  };
  /** Start a run on behalf of an epoch: POST /v1/runs/{run}/start */
  start: {
    args: {
    path: { run: string };
    body: StartBody;
    };
    answer: unknown;
  };
  /** Boot a new epoch and sweep with it, before serving anything (rule O5): POST /v1/processes/{process}/startup */
  startup: {
    args: {
    path: { process: string };
    body: StartupBody;
    };
    answer: StartupWritten;
  };
  /** Record a clean stop of an epoch (process.stopping, process.stopped): POST /v1/epochs/{epoch}/stop */
  stop: {
    args: {
    path: { epoch: string };
    body: StopBody;
    };
    answer: EpochWritten;
  };
  /** Runs with an open tick streak: GET /v1/streaking */
  streaking: {
    args: {
    query?: { status?: Status[] | null; predicate?: string[] | null; code?: string[] | null; label?: string[] | null; process?: string[] | null };
    };
    answer: StreakingRuns;
  };
  /** The log as a live stream (Server-Sent Events, rule H5): GET /v1/stream */
  stream: {
    args: {
    query?: { after?: number | null; run?: string[] | null; slot?: string[] | null; type?: string[] | null };
    };
    answer: unknown;
  };
  /** Sweep with a live epoch the caller booted, judged by its boot instant (rule O5): POST /v1/epochs/{epoch}/sweep */
  sweep: {
    args: {
    path: { epoch: string };
    body: SweepBody;
    };
    answer: SweepReport;
  };
  /** The chain's head, to keep elsewhere: GET /v1/digest */
  takeDigest: {
    args: { };
    answer: Digest;
  };
  /** Fleet tick health: GET /v1/tick-health */
  tickHealthSummary: {
    args: { };
    answer: TickHealth;
  };
  /** The chain and every view checked: GET /v1/verify */
  verify: {
    args: {
    query?: { digest?: string[] | null };
    };
    answer: Verification;
  };
  /** The history under another orphan policy: GET /v1/whatif */
  whatif: {
    args: {
    query: { policy: string; at?: string | null };
    };
    answer: WhatIf;
  };
}

/** Where each operation is served. */
export const ROUTES: { readonly [K in keyof Operations]: { readonly method: string; readonly path: string } } = {
  AsyncCallable: { method: "POST", path: "/v1/tokens" },
  auditQuery: { method: "GET", path: "/v1/audit/query" },
  auditReport: { method: "GET", path: "/v1/audit/reports/{name}" },
  begin_stop: { method: "POST", path: "/v1/epochs/{epoch}/begin-stop" },
  boot: { method: "POST", path: "/v1/processes/{process}/boot" },
  cancel: { method: "POST", path: "/v1/runs/{run}/cancel" },
  checkpoint: { method: "POST", path: "/v1/runs/{run}/checkpoint" },
  correct: { method: "POST", path: "/v1/runs/{run}/correct" },
  delete: { method: "POST", path: "/v1/runs/{run}/delete" },
  epochLiveness: { method: "GET", path: "/v1/epochs" },
  exited: { method: "POST", path: "/v1/processes/{process}/epochs/{epoch}/exited" },
  fail: { method: "POST", path: "/v1/runs/{run}/fail" },
  finish: { method: "POST", path: "/v1/runs/{run}/finish" },
  handleSchemaPathNotFound: { method: "GET", path: "/openapi/{path}" },
  healthz: { method: "GET", path: "/healthz" },
  historyOf: { method: "GET", path: "/v1/runs/{run}/history" },
  listRuns: { method: "GET", path: "/v1/runs" },
  listTokens: { method: "GET", path: "/v1/tokens" },
  metricsRoute: { method: "GET", path: "/metrics" },
  OpenapiElementsHandler: { method: "GET", path: "/openapi/elements" },
  OpenapiHandler: { method: "GET", path: "/openapi" },
  OpenapiOpenapiJsonHandler: { method: "GET", path: "/openapi/openapi.json" },
  OpenapiOpenapiYamlHandler: { method: "GET", path: "/openapi/openapi.yaml" },
  OpenapiOpenapiYmlHandler: { method: "GET", path: "/openapi/openapi.yml" },
  OpenapiRapidocHandler: { method: "GET", path: "/openapi/rapidoc" },
  OpenapiRedocHandler: { method: "GET", path: "/openapi/redoc" },
  OpenapiSwaggerHandler: { method: "GET", path: "/openapi/swagger" },
  orphaned: { method: "GET", path: "/v1/orphans" },
  pause: { method: "POST", path: "/v1/runs/{run}/pause" },
  probe: { method: "POST", path: "/v1/probe" },
  queue: { method: "POST", path: "/v1/runs/{run}/queue" },
  readyz: { method: "GET", path: "/readyz" },
  renderOauth2Redirect: { method: "GET", path: "/openapi/oauth2-redirect.html" },
  replay: { method: "GET", path: "/v1/replay" },
  resume: { method: "POST", path: "/v1/runs/{run}/resume" },
  revokeToken: { method: "DELETE", path: "/v1/tokens/{token}" },
  rewind: { method: "POST", path: "/v1/runs/{run}/rewind" },
  runView: { method: "GET", path: "/v1/runs/{run}" },
  start: { method: "POST", path: "/v1/runs/{run}/start" },
  startup: { method: "POST", path: "/v1/processes/{process}/startup" },
  stop: { method: "POST", path: "/v1/epochs/{epoch}/stop" },
  streaking: { method: "GET", path: "/v1/streaking" },
  stream: { method: "GET", path: "/v1/stream" },
  sweep: { method: "POST", path: "/v1/epochs/{epoch}/sweep" },
  takeDigest: { method: "GET", path: "/v1/digest" },
  tickHealthSummary: { method: "GET", path: "/v1/tick-health" },
  verify: { method: "GET", path: "/v1/verify" },
  whatif: { method: "GET", path: "/v1/whatif" },
};
