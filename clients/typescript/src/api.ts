// Generated from docs/openapi.json by scripts/generate.mjs: do not edit by hand.
// `make ts-client` regenerates it; CI fails when it is stale.

export interface AuditTable {
  columns: string[];
  rows: ((string | number | boolean | ((string | number | boolean | null)[]) | ({ [key: string]: string | number | boolean | null; }) | null)[])[];
}

export interface BatchBody {
  commands: (QueueCommand | StartCommand | CheckpointCommand | PauseCommand | ResumeCommand | FailCommand | FinishCommand | CancelCommand | CorrectCommand | RewindCommand | DeleteCommand | BeginStopCommand | StopCommand | ExitedCommand)[];
}

export interface BatchResult {
  already: boolean;
  epoch?: EpochState | null;
  op: string;
  recorded: boolean;
  run?: RunState | null;
}

export interface BatchWritten {
  already: boolean;
  appended: number;
  recorded: boolean;
  results: BatchResult[];
}

export interface Beat {
  at: string;
  node: string;
  ref: string;
}

export interface BeginStopCommand {
  actor?: string | null;
  epoch: string;
  op: "begin_stop";
  reason?: string | null;
}

export interface BootBody {
  actor?: string | null;
  booted_at: string;
  epoch?: string | null;
  host: string;
  host_boot?: string | null;
  machine?: string | null;
  pid: number;
  pid_start?: number | null;
}

export interface CancelBody {
  actor?: string | null;
  at?: string | null;
  reason?: string | null;
}

export interface CancelCommand {
  actor?: string | null;
  at?: string | null;
  op: "cancel";
  reason?: string | null;
  run: string;
}

export interface CancelledFrom {
  cause?: Cause | null;
  code?: string;
  error?: string | null;
  reason?: string | null;
  status: Status;
}

export interface Cause {
  cause?: Cause | null;
  code?: string;
  message?: string | null;
}

export interface ChainReport {
  chained: boolean;
  digests?: Digest[];
  events?: number;
  failure?: Failure | null;
  hash?: string;
  links?: number;
  position?: number;
}

export interface Checkpoint {
  node?: string | null;
  ref: string;
}

export interface CheckpointBody {
  actor?: string | null;
  at?: string | null;
  epoch?: string | null;
  node: string;
  reason?: string | null;
  ref: string;
}

export interface CheckpointCommand {
  actor?: string | null;
  at?: string | null;
  epoch?: string | null;
  node: string;
  op: "checkpoint";
  reason?: string | null;
  ref: string;
  run: string;
}

export interface CorrectBody {
  actor: string;
  at?: string | null;
  code?: string;
  error?: string | null;
  reason: string;
  to: Status;
}

export interface CorrectCommand {
  actor: string;
  at?: string | null;
  code?: string;
  error?: string | null;
  op: "correct";
  reason: string;
  run: string;
  to: Status;
}

export interface DamagedRun {
  error: string;
  position: number;
  run: string;
  tag?: string | null;
}

export interface DeadLetterRow {
  at: string;
  cleanup_error?: string | null;
  deadline_s: number;
  error: string;
  error_class: string;
  failing_since: string;
  failures: number;
  position: number;
  run: string;
  step: string;
  tick: string;
}

export interface DeleteBody {
  actor?: string | null;
  at?: string | null;
  reason?: string | null;
}

export interface DeleteCommand {
  actor?: string | null;
  at?: string | null;
  op: "delete";
  reason?: string | null;
  run: string;
}

export interface Digest {
  at: string;
  hash: string;
  position: number;
}

export interface EpochLiveness {
  ended?: string | null;
  epoch: EpochState;
  live: boolean;
  why?: string | null;
}

export interface EpochState {
  booted_at: string;
  epoch: string;
  exit_code?: number | null;
  exit_evidence?: string | null;
  exit_signal?: number | null;
  exited_at?: string | null;
  exited_by?: string | null;
  host?: string | null;
  host_boot?: string | null;
  machine?: string | null;
  pid?: number | null;
  pid_start?: number | null;
  process: string;
  recorded_at: string;
  retired_at?: string | null;
  stopped_at?: string | null;
  stopping_at?: string | null;
  superseded_at?: string | null;
  superseded_by?: string | null;
  sweep_failed_at?: string | null;
  sweep_skipped?: string | null;
}

export interface EpochWritten {
  already: boolean;
  epoch: EpochState;
  recorded: boolean;
}

export interface ErrorClassHealth {
  dead_letters: DeadLetterRow[];
  error_class: string;
  lag: number;
  streaking: Streaking[];
}

export interface ExitedBody {
  actor?: string | null;
  at?: string | null;
  evidence?: string | null;
  exit_code?: number | null;
  observed_by: string;
  reason?: string | null;
  signal?: number | null;
}

export interface ExitedCommand {
  actor?: string | null;
  at?: string | null;
  epoch: string;
  evidence?: string | null;
  exit_code?: number | null;
  observed_by: string;
  op: "exited";
  process: string;
  reason?: string | null;
  signal?: number | null;
}

export interface FailBody {
  actor?: string | null;
  at?: string | null;
  cause?: Cause | null;
  code: string;
  epoch?: string | null;
  error?: string | null;
  reason?: string | null;
  resumable: boolean;
}

export interface FailCommand {
  actor?: string | null;
  at?: string | null;
  cause?: Cause | null;
  code: string;
  epoch?: string | null;
  error?: string | null;
  op: "fail";
  reason?: string | null;
  resumable: boolean;
  run: string;
}

export interface Failure {
  kind: string;
  message: string;
  position: number;
  stream?: string | null;
  version?: number | null;
}

export interface FencedEnd {
  at: string;
  epoch: string;
  refused: string;
  reported: Status;
}

export interface Finding {
  epoch: string;
  evidence?: string | null;
  pid?: number | null;
  process: string;
  verdict: string;
}

export interface FinishBody {
  actor?: string | null;
  at?: string | null;
  epoch?: string | null;
  reason?: string | null;
}

export interface FinishCommand {
  actor?: string | null;
  at?: string | null;
  epoch?: string | null;
  op: "finish";
  reason?: string | null;
  run: string;
}

export interface FleetState {
  at: string | null;
  events: number;
  parked: { [key: string]: number[]; };
  position: number;
  views: { [key: string]: unknown; };
}

export interface Health {
  status: string;
}

export interface HistoryEntry {
  event?: RunQueued | RunStarted | RunCheckpointed | RunPaused | RunResumed | RunFailed | RunCancelled | RunFinished | RunRewound | RunDeleted | RunCorrected | RunTickFailed | RunTickRecovered | RunDeadLettered | RunRecovered | RunFenced | RunImported | ProcessBooted | ProcessStopping | ProcessStopped | ProcessExited | ProcessSweepSkipped | ProcessSweepFailed | ProcessRetired | LedgerDefaultSlot | RoleGranted | PassItemFailed | PassItemRecovered | PassItemRetired | IdempotencyKept | TokenIssued | TokenRevoked | null;
  from_status: string | null;
  label: string;
  poison?: Poison | null;
  position: number;
  version: number;
}

export interface IdempotencyKept {
  actor?: string | null;
  at: string;
  body: string;
  fingerprint: string;
  key: string;
  reason?: string | null;
  status: number;
  type: "idempotency.kept";
}

export interface IssuedToken {
  secret: string;
  token: Token;
}

export interface LedgerDefaultSlot {
  actor?: string | null;
  at: string;
  reason?: string | null;
  slot?: string | null;
  type: "ledger.default_slot";
}

export interface ListedRun {
  actor?: string | null;
  answers?: { [key: string]: string; } | null;
  attempt?: number;
  cancelled_from?: CancelledFrom | null;
  cause?: Cause | null;
  checkpoint?: Checkpoint | null;
  code?: string;
  code_shown?: string;
  corrections?: number;
  deleted?: boolean;
  epoch?: string | null;
  error?: string | null;
  fenced?: number;
  fenced_end?: FencedEnd | null;
  interaction?: string | null;
  labels?: { [key: string]: string; };
  parent?: string | null;
  predicates?: { [key: string]: boolean; };
  process?: string | null;
  questions?: string[] | null;
  queued_at: string;
  queued_process?: string | null;
  reason?: string | null;
  run: string;
  slot_epoch?: string | null;
  source?: string | null;
  source_status?: string | null;
  started_at?: string | null;
  status: Status;
  tick_streak?: TickStreak | null;
  updated_at: string;
  version?: number;
  workflow?: string | null;
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
  rule?: string;
  state: RunState;
  unjudged?: Unjudged | null;
  verdict?: Verdict | null;
  why?: string;
}

export interface PassItemFailed {
  actor?: string | null;
  at: string;
  deliveries: number;
  epoch?: string | null;
  error?: string;
  error_class: string;
  item: string;
  name: string;
  reason?: string | null;
  tick: string;
  type: "pass.item_failed";
}

export interface PassItemRecovered {
  actor?: string | null;
  at: string;
  epoch?: string | null;
  item: string;
  name: string;
  reason?: string | null;
  tick: string;
  type: "pass.item_recovered";
}

export interface PassItemRetired {
  actor?: string | null;
  at: string;
  ceiling: number;
  deliveries: number;
  epoch?: string | null;
  error?: string;
  error_class: string;
  item: string;
  name: string;
  reason?: string | null;
  tick: string;
  type: "pass.item_retired";
}

export interface PauseBody {
  actor?: string | null;
  at?: string | null;
  epoch?: string | null;
  interaction?: string | null;
  kind: "operator" | "waiting_human";
  questions?: string[] | null;
  reason?: string | null;
}

export interface PauseCommand {
  actor?: string | null;
  at?: string | null;
  epoch?: string | null;
  interaction?: string | null;
  kind: "operator" | "waiting_human";
  op: "pause";
  questions?: string[] | null;
  reason?: string | null;
  run: string;
}

export interface Poison {
  error: string;
  position: number;
  stream: string;
  tag: string | null;
  version: number;
}

export interface ProbeBody {
  epoch?: string | null;
  sweep?: boolean;
}

export interface ProbeReport {
  exited?: number;
  findings?: Finding[];
  host: string;
  host_boot: string | null;
  observed_by: string;
  retired?: string[];
  sweep?: SweepReport | null;
  swept_by?: string | null;
}

export interface Problem {
  detail: string;
  error?: string | null;
  fields?: { [key: string]: unknown; } | null;
  status: number;
  title: string;
  type: string;
}

export interface ProcessBooted {
  actor?: string | null;
  at: string;
  booted_at: string;
  epoch: string;
  host?: string | null;
  host_boot?: string | null;
  machine?: string | null;
  pid?: number | null;
  pid_start?: number | null;
  process: string;
  reason?: string | null;
  type: "process.booted";
}

export interface ProcessExited {
  actor?: string | null;
  at: string;
  epoch: string;
  evidence?: string | null;
  exit_code?: number | null;
  observed_by: string;
  process: string;
  reason?: string | null;
  signal?: number | null;
  type: "process.exited";
}

export interface ProcessRetired {
  actor?: string | null;
  at: string;
  epoch: string;
  process: string;
  reason?: string | null;
  type: "process.retired";
}

export interface ProcessStopped {
  actor?: string | null;
  at: string;
  epoch: string;
  process: string;
  reason?: string | null;
  type: "process.stopped";
}

export interface ProcessStopping {
  actor?: string | null;
  at: string;
  epoch: string;
  process: string;
  reason?: string | null;
  type: "process.stopping";
}

export interface ProcessSweepFailed {
  actor?: string | null;
  at: string;
  attempts: number;
  epoch: string;
  error: string;
  process: string;
  reason?: string | null;
  type: "process.sweep_failed";
}

export interface ProcessSweepSkipped {
  actor?: string | null;
  at: string;
  booted_at?: string | null;
  epoch: string;
  now?: string | null;
  process: string;
  reason?: string | null;
  type: "process.sweep_skipped";
  why: string;
}

export interface QueueBody {
  actor?: string | null;
  at?: string | null;
  labels?: { [key: string]: string; } | null;
  parent?: string | null;
  process?: string | null;
  reason?: string | null;
  workflow?: string | null;
}

export interface QueueCommand {
  actor?: string | null;
  at?: string | null;
  labels?: { [key: string]: string; } | null;
  op: "queue";
  parent?: string | null;
  process?: string | null;
  reason?: string | null;
  run: string;
  workflow?: string | null;
}

export interface Ready {
  bound: number;
  head: number;
  max_lag: number;
  status: string;
}

export interface ReplayedDocument {
  state: FleetState;
  state_hash: string;
}

export interface ResumeBody {
  actor?: string | null;
  answers?: { [key: string]: string; } | null;
  at?: string | null;
  by: "operator" | "auto";
  reason?: string | null;
}

export interface ResumeCommand {
  actor?: string | null;
  answers?: { [key: string]: string; } | null;
  at?: string | null;
  by: "operator" | "auto";
  op: "resume";
  reason?: string | null;
  run: string;
}

export interface RewindBody {
  actor?: string | null;
  at?: string | null;
  reason?: string | null;
  to_ref?: string | null;
}

export interface RewindCommand {
  actor?: string | null;
  at?: string | null;
  op: "rewind";
  reason?: string | null;
  run: string;
  to_ref?: string | null;
}

export interface RoleBody {
  actor?: string | null;
  epoch: string;
  reason?: string | null;
}

export interface RoleGranted {
  actor?: string | null;
  at: string;
  epoch: string;
  previous_epoch?: string | null;
  previous_evidence?: string | null;
  previous_process?: string | null;
  previous_rule?: string | null;
  previous_token?: number | null;
  process: string;
  reason?: string | null;
  role: string;
  token?: number;
  type: "role.granted";
}

export interface RoleHolder {
  ended?: string | null;
  grant?: RoleState | null;
  live?: boolean | null;
  role: string;
  why?: string | null;
}

export interface RoleState {
  epoch: string;
  granted_at: string;
  process: string;
  role: string;
  token: number;
  version?: number;
}

export interface RoleWritten {
  already: boolean;
  grant: RoleState;
  recorded: boolean;
}

export interface RunCancelled {
  actor?: string | null;
  at: string;
  code?: string;
  reason?: string | null;
  run: string;
  status?: Status | null;
  type: "run.cancelled";
}

export interface RunCheckpointed {
  actor?: string | null;
  at: string;
  code?: string;
  epoch?: string | null;
  node: string;
  reason?: string | null;
  ref: string;
  run: string;
  status?: Status | null;
  type: "run.checkpointed";
}

export interface RunCorrected {
  actor?: string | null;
  at: string;
  code?: string;
  error?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  to: Status;
  type: "run.corrected";
}

export interface RunDeadLettered {
  actor?: string | null;
  at: string;
  cleanup_error?: string | null;
  code?: string;
  deadline_s: number;
  epoch?: string | null;
  error?: string;
  error_class: string;
  failing_since: string;
  failures: number;
  reason?: string | null;
  run: string;
  status?: Status | null;
  step: string;
  tick: string;
  type: "run.dead_lettered";
}

export interface RunDeleted {
  actor?: string | null;
  at: string;
  code?: string;
  reason?: string | null;
  run: string;
  status?: Status | null;
  type: "run.deleted";
}

export interface RunFailed {
  actor?: string | null;
  at: string;
  cause?: Cause | null;
  code?: string;
  epoch?: string | null;
  error?: string | null;
  reason?: string | null;
  resumable: boolean;
  run: string;
  status?: Status | null;
  type: "run.failed";
}

export interface RunFenced {
  actor?: string | null;
  at: string;
  code?: string;
  epoch: string;
  reason?: string | null;
  refused: string;
  report?: { [key: string]: unknown; };
  reported?: Status | null;
  rule?: string | null;
  run: string;
  status?: Status | null;
  stopped_at?: string | null;
  superseded_by?: string | null;
  type: "run.fenced";
  why: string;
}

export interface RunFinished {
  actor?: string | null;
  at: string;
  code?: string;
  epoch?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  type: "run.finished";
}

export interface RunImported {
  actor?: string | null;
  at: string;
  code?: string;
  cursor: number;
  reason?: string | null;
  run: string;
  source: string;
  source_status?: string | null;
  source_updated?: string | null;
  status?: Status | null;
  type: "run.imported";
}

export interface RunPage {
  lag: number;
  next?: string | null;
  runs: ListedRun[];
}

export interface RunPaused {
  actor?: string | null;
  at: string;
  code?: string;
  epoch?: string | null;
  interaction?: string | null;
  kind: "operator" | "waiting_human" | "orchestrator";
  questions?: string[] | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  type: "run.paused";
}

export interface RunQueued {
  actor?: string | null;
  at: string;
  code?: string;
  labels?: { [key: string]: string; };
  parent?: string | null;
  process?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  type: "run.queued";
  workflow?: string | null;
}

export interface RunRecovered {
  actor?: string | null;
  at: string;
  booted_at?: string | null;
  code?: string;
  cutoff?: string | null;
  evidence?: string | null;
  exit_code?: number | null;
  exited_at?: string | null;
  host?: string | null;
  host_boot?: string | null;
  margin?: number | null;
  observed_by?: string | null;
  owner_epoch?: string | null;
  owner_process?: string | null;
  reason?: string | null;
  rebooted_by?: string | null;
  rebooted_to?: string | null;
  rule: string;
  run: string;
  signal?: number | null;
  started_at?: string | null;
  status?: Status | null;
  stopped_at?: string | null;
  superseded_by?: string | null;
  swept_by: string;
  swept_by_process: string;
  type: "run.recovered";
}

export interface RunResumed {
  actor?: string | null;
  answers?: { [key: string]: string; } | null;
  at: string;
  by: "operator" | "auto" | "orchestrator";
  code?: string;
  reason?: string | null;
  run: string;
  status?: Status | null;
  type: "run.resumed";
}

export interface RunRewound {
  actor?: string | null;
  at: string;
  code?: string;
  reason?: string | null;
  run: string;
  status?: Status | null;
  to_ref?: string | null;
  type: "run.rewound";
}

export interface RunStarted {
  actor?: string | null;
  at: string;
  code?: string;
  epoch?: string | null;
  process?: string | null;
  reason?: string | null;
  run: string;
  slot_epoch?: string | null;
  status?: Status | null;
  type: "run.started";
}

export interface RunState {
  actor?: string | null;
  answers?: { [key: string]: string; } | null;
  attempt?: number;
  cancelled_from?: CancelledFrom | null;
  cause?: Cause | null;
  checkpoint?: Checkpoint | null;
  code?: string;
  corrections?: number;
  deleted?: boolean;
  epoch?: string | null;
  error?: string | null;
  fenced?: number;
  fenced_end?: FencedEnd | null;
  interaction?: string | null;
  labels?: { [key: string]: string; };
  last?: RunQueued | RunStarted | RunCheckpointed | RunPaused | RunResumed | RunFailed | RunCancelled | RunFinished | RunRewound | RunDeleted | RunCorrected | RunTickFailed | RunTickRecovered | RunDeadLettered | RunRecovered | RunFenced | RunImported | null;
  parent?: string | null;
  process?: string | null;
  questions?: string[] | null;
  queued_at: string;
  queued_process?: string | null;
  reason?: string | null;
  run: string;
  slot_epoch?: string | null;
  source?: string | null;
  source_status?: string | null;
  started_at?: string | null;
  status: Status;
  tick_streak?: TickStreak | null;
  updated_at: string;
  version?: number;
  workflow?: string | null;
}

export interface RunTickFailed {
  actor?: string | null;
  at: string;
  code?: string;
  epoch?: string | null;
  error?: string;
  error_class: string;
  reason?: string | null;
  run: string;
  status?: Status | null;
  step: string;
  tick: string;
  type: "run.tick_failed";
}

export interface RunTickHealth {
  dead_letters: DeadLetterRow[];
  ledger_now: string | null;
  streak: OpenStreak | null;
}

export interface RunTickRecovered {
  actor?: string | null;
  at: string;
  code?: string;
  epoch?: string | null;
  reason?: string | null;
  run: string;
  status?: Status | null;
  tick: string;
  type: "run.tick_recovered";
}

export interface RunView {
  children?: string[];
  code_shown?: string;
  lag: number;
  predicates?: { [key: string]: boolean; };
  state: RunState;
  tick_health: RunTickHealth;
}

export interface RunWritten {
  already: boolean;
  recorded: boolean;
  run: RunState;
}

export interface StartBody {
  actor?: string | null;
  at?: string | null;
  epoch?: string | null;
  process?: string | null;
  reason?: string | null;
}

export interface StartCommand {
  actor?: string | null;
  at?: string | null;
  epoch?: string | null;
  op: "start";
  process?: string | null;
  reason?: string | null;
  run: string;
}

export interface StartupBody {
  actor?: string | null;
  booted_at: string;
  epoch?: string | null;
  host: string;
  host_boot?: string | null;
  machine?: string | null;
  margin?: number | null;
  new_slot?: boolean;
  pid: number;
  pid_start?: number | null;
}

export interface StartupWritten {
  epoch: EpochState;
  report: SweepReport;
}

/** The nine statuses of a run. Which status answers which policy question lives in */
export type Status = "queued" | "running" | "paused_operator" | "paused_waiting_human" | "paused_orchestrator" | "failed_resumable" | "failed" | "cancelled" | "finished";

export interface StopBody {
  actor?: string | null;
  reason?: string | null;
}

export interface StopCommand {
  actor?: string | null;
  epoch: string;
  op: "stop";
  reason?: string | null;
}

export interface Streaking {
  state: RunState;
  streak: OpenStreak;
}

export interface StreakingRuns {
  lag: number;
  runs: Streaking[];
}

export interface SweepBody {
  margin?: number | null;
}

export interface SweepReport {
  attempts?: number;
  conflict_rounds?: number;
  damaged?: DamagedRun[];
  epoch: string;
  fallback_skipped?: string | null;
  outcome: string;
  process: string;
  recovered?: Verdict[];
  unjudged?: Unjudged[];
}

export interface TickDeadLetter {
  failing_since: string;
  failures: number;
  reason: string;
  recorded: boolean;
  run: string;
  step: string;
}

export interface TickFailed {
  dead_lettered: boolean;
  error: string;
  error_class: string;
  failing_since: string;
  failures: number;
  recorded: boolean;
  run: string;
  step: string;
}

export interface TickHealth {
  dead_letters: number;
  dead_letters_by_error_class: { [key: string]: number; };
  dead_letters_by_step: { [key: string]: number; };
  now: string | null;
  open_streaks: OpenStreak[];
}

export interface TickOutcome {
  abandoned_after_s?: number | null;
  error?: string;
  error_class?: string | null;
  run: string;
  step?: string | null;
}

export interface TickReportBody {
  outcomes: TickOutcome[];
  tick?: string | null;
  tick_failure_deadline_s?: number | null;
}

export interface TickReported {
  active: number;
  advanced: string[];
  appended: number;
  dead_letters: TickDeadLetter[];
  failures: TickFailed[];
  recovered: string[];
  tick: string;
  unrecorded: TickUnrecorded[];
}

export interface TickStreak {
  error?: string;
  error_class: string;
  failures: number;
  last_at: string;
  since: string;
  step: string;
  tick: string;
}

export interface TickUnrecorded {
  error: string;
  event: string;
  run: string;
}

export interface Token {
  id: string;
  issued_at: string;
  issued_by?: string | null;
  name?: string | null;
  revoked_at?: string | null;
  revoked_by?: string | null;
  role: string;
  slots?: string[];
}

export interface TokenIssued {
  actor?: string | null;
  at: string;
  digest: string;
  name?: string | null;
  reason?: string | null;
  role: string;
  slots?: string[];
  token: string;
  type: "token.issued";
}

export interface TokenRequest {
  name?: string | null;
  reason?: string | null;
  role: string;
  slots?: string[];
}

export interface TokenRevoked {
  actor?: string | null;
  at: string;
  reason?: string | null;
  token: string;
  type: "token.revoked";
}

export interface Unjudged {
  epoch?: string | null;
  rule?: string;
  run: string;
  started_at?: string | null;
}

export interface Verdict {
  booted_at?: string | null;
  cutoff?: string | null;
  default_slot?: string | null;
  evidence?: string | null;
  exit_code?: number | null;
  exited_at?: string | null;
  host?: string | null;
  host_boot?: string | null;
  margin?: number | null;
  observed_by?: string | null;
  owner_epoch?: string | null;
  owner_process?: string | null;
  rebooted_by?: string | null;
  rebooted_to?: string | null;
  relative_to?: string | null;
  rule: string;
  run: string;
  signal?: number | null;
  started_at?: string | null;
  stopped_at?: string | null;
  superseded_by?: string | null;
}

export interface Verification {
  chain: ChainReport;
  views: Verified[];
}

export interface Verified {
  built?: boolean;
  difference?: verify_Difference | null;
  parked: number;
  position: number;
  rows: number;
  view: string;
}

export interface WhatIf {
  at: string | null;
  differences: whatif_Difference[];
  policy: string;
  position: number;
  sweeps: number;
}

export interface verify_Difference {
  column?: string | null;
  key?: string | null;
  live?: unknown;
  message: string;
  replay?: unknown;
  view: string;
}

export interface whatif_Difference {
  age_s?: number | null;
  alternative?: Verdict | null;
  at: string;
  found_at?: string | null;
  found_by?: string | null;
  kind: string;
  last_checkpoint?: Beat | null;
  message?: string;
  owner_epoch?: string | null;
  owner_live?: boolean | null;
  owner_process?: string | null;
  position: number;
  recorded_rule?: string | null;
  run: string;
  running_for_s?: number | null;
  started_at?: string | null;
  sweep_epoch: string;
  sweep_process: string;
  then?: string | null;
  until?: string | null;
  until_why?: string | null;
}

/** Every operation of the service: what it takes (`args`) and what it answers. */
export interface Operations {
  /** Take or keep an exclusive role for a live epoch, with its fencing token (rule T7): POST /v1/roles/{role}/acquire */
  acquire_role: {
    args: {
    path: { role: string };
    body: RoleBody;
    };
    answer: RoleWritten;
  };
  /** Read-only audit SQL: GET /v1/audit/query */
  audit_query: {
    args: {
    query: { sql: string; timeout?: number | null; memory_limit?: string | null };
    };
    answer: AuditTable;
  };
  /** A canned audit report: GET /v1/audit/reports/{name} */
  audit_report: {
    args: {
    path: { name: string };
    query?: { as_of?: string | null; period?: string; label?: string | null; timeout?: number | null; memory_limit?: string | null };
    };
    answer: AuditTable;
  };
  /** A group commit: every command in one transaction, all or nothing: POST /v1/batch */
  batch: {
    args: {
    body: BatchBody;
    };
    answer: BatchWritten;
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
    answer: RunWritten;
  };
  /** Record a checkpoint: POST /v1/runs/{run}/checkpoint */
  checkpoint: {
    args: {
    path: { run: string };
    body: CheckpointBody;
    };
    answer: RunWritten;
  };
  /** Correct a final run's verdict (audited): POST /v1/runs/{run}/correct */
  correct: {
    args: {
    path: { run: string };
    body: CorrectBody;
    };
    answer: RunWritten;
  };
  /** Delete a run (its history stays): POST /v1/runs/{run}/delete */
  delete: {
    args: {
    path: { run: string };
    body: DeleteBody;
    };
    answer: RunWritten;
  };
  /** Epochs with their liveness facts: GET /v1/epochs */
  epoch_liveness: {
    args: {
    query?: { process?: string | null; live?: boolean; retired?: boolean };
    };
    answer: EpochLiveness[];
  };
  /** One error class's open streaks and dead-letters: GET /v1/tick-health/error-class */
  error_class_health: {
    args: {
    query: { name: string };
    };
    answer: ErrorClassHealth;
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
    answer: RunWritten;
  };
  /** Record that a run finished: POST /v1/runs/{run}/finish */
  finish: {
    args: {
    path: { run: string };
    body: FinishBody;
    };
    answer: RunWritten;
  };
  /** Alive: answers without touching the store (rule H7): GET /healthz */
  healthz: {
    args: { };
    answer: Health;
  };
  /** A run's history: GET /v1/runs/{run}/history */
  history_of: {
    args: {
    path: { run: string };
    };
    answer: HistoryEntry[];
  };
  /** Runs, filtered, one page: GET /v1/runs */
  list_runs: {
    args: {
    query?: { status?: Status[] | null; predicate?: string[] | null; code?: string[] | null; label?: string[] | null; process?: string[] | null; parent?: string[] | null; after?: string | null; limit?: number };
    };
    answer: RunPage;
  };
  /** Prometheus metrics (rule H7): GET /metrics */
  metrics: {
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
    answer: RunWritten;
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
    answer: RunWritten;
  };
  /** Ready: the store answers and the views are caught up (rule H7): GET /readyz */
  readyz: {
    args: { };
    answer: Ready;
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
    answer: RunWritten;
  };
  /** Rewind a run to a checkpoint: POST /v1/runs/{run}/rewind */
  rewind: {
    args: {
    path: { run: string };
    body: RewindBody;
    };
    answer: RunWritten;
  };
  /** Who holds an exclusive role: GET /v1/roles/{role} */
  role_holder: {
    args: {
    path: { role: string };
    };
    answer: RoleHolder;
  };
  /** One run: GET /v1/runs/{run} */
  run_view: {
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
    answer: RunWritten;
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
  take_digest: {
    args: { };
    answer: Digest;
  };
  /** Fleet tick health: GET /v1/tick-health */
  tick_health_summary: {
    args: { };
    answer: TickHealth;
  };
  /** Report a tick's per-run outcomes; the ledger applies T1-T3 and names the dead-lettered runs: POST /v1/epochs/{epoch}/tick */
  tick_report: {
    args: {
    path: { epoch: string };
    body: TickReportBody;
    };
    answer: TickReported;
  };
  /** Asynccallable: POST /v1/tokens */
  token_create: {
    args: {
    body: TokenRequest;
    };
    answer: IssuedToken;
  };
  /** ListTokens: GET /v1/tokens */
  token_list: {
    args: { };
    answer: Token[];
  };
  /** RevokeToken: DELETE /v1/tokens/{token} */
  token_revoke: {
    args: {
    path: { token: string };
    };
    answer: Token;
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
  acquire_role: { method: "POST", path: "/v1/roles/{role}/acquire" },
  audit_query: { method: "GET", path: "/v1/audit/query" },
  audit_report: { method: "GET", path: "/v1/audit/reports/{name}" },
  batch: { method: "POST", path: "/v1/batch" },
  begin_stop: { method: "POST", path: "/v1/epochs/{epoch}/begin-stop" },
  boot: { method: "POST", path: "/v1/processes/{process}/boot" },
  cancel: { method: "POST", path: "/v1/runs/{run}/cancel" },
  checkpoint: { method: "POST", path: "/v1/runs/{run}/checkpoint" },
  correct: { method: "POST", path: "/v1/runs/{run}/correct" },
  delete: { method: "POST", path: "/v1/runs/{run}/delete" },
  epoch_liveness: { method: "GET", path: "/v1/epochs" },
  error_class_health: { method: "GET", path: "/v1/tick-health/error-class" },
  exited: { method: "POST", path: "/v1/processes/{process}/epochs/{epoch}/exited" },
  fail: { method: "POST", path: "/v1/runs/{run}/fail" },
  finish: { method: "POST", path: "/v1/runs/{run}/finish" },
  healthz: { method: "GET", path: "/healthz" },
  history_of: { method: "GET", path: "/v1/runs/{run}/history" },
  list_runs: { method: "GET", path: "/v1/runs" },
  metrics: { method: "GET", path: "/metrics" },
  orphaned: { method: "GET", path: "/v1/orphans" },
  pause: { method: "POST", path: "/v1/runs/{run}/pause" },
  probe: { method: "POST", path: "/v1/probe" },
  queue: { method: "POST", path: "/v1/runs/{run}/queue" },
  readyz: { method: "GET", path: "/readyz" },
  replay: { method: "GET", path: "/v1/replay" },
  resume: { method: "POST", path: "/v1/runs/{run}/resume" },
  rewind: { method: "POST", path: "/v1/runs/{run}/rewind" },
  role_holder: { method: "GET", path: "/v1/roles/{role}" },
  run_view: { method: "GET", path: "/v1/runs/{run}" },
  start: { method: "POST", path: "/v1/runs/{run}/start" },
  startup: { method: "POST", path: "/v1/processes/{process}/startup" },
  stop: { method: "POST", path: "/v1/epochs/{epoch}/stop" },
  streaking: { method: "GET", path: "/v1/streaking" },
  stream: { method: "GET", path: "/v1/stream" },
  sweep: { method: "POST", path: "/v1/epochs/{epoch}/sweep" },
  take_digest: { method: "GET", path: "/v1/digest" },
  tick_health_summary: { method: "GET", path: "/v1/tick-health" },
  tick_report: { method: "POST", path: "/v1/epochs/{epoch}/tick" },
  token_create: { method: "POST", path: "/v1/tokens" },
  token_list: { method: "GET", path: "/v1/tokens" },
  token_revoke: { method: "DELETE", path: "/v1/tokens/{token}" },
  verify: { method: "GET", path: "/v1/verify" },
  whatif: { method: "GET", path: "/v1/whatif" },
};
