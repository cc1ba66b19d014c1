/* Generated from the Rust types (shared::edge::openapi) by scripts/gen-types.sh: do not edit. */

/**
 * What the agent is doing, for the UI's status line.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "AgentActivity".
 */
export type AgentActivity = 'thinking' | 'executing' | 'waiting_on_user';
/**
 * How a new plan proceeds (CURRENT_FLOW §6.2).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "PlanMode".
 */
export type PlanMode = 'auto_execute' | 'draft_only' | 'agent_review';
/**
 * How the steps of one stage run.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "StageMode".
 */
export type StageMode = 'parallel' | 'sequence';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ExecutorKind".
 */
export type ExecutorKind = 'planner' | 'research' | 'writer' | 'editor' | 'tooling';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "StepIntent".
 */
export type StepIntent = 'research' | 'analysis' | 'draft' | 'edit' | 'create' | 'update' | 'review';
/**
 * Which budget ran out.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "BudgetKind".
 */
export type BudgetKind = 'tokens_per_day' | 'turns_per_minute' | 'concurrent_turns' | 'web_calls_per_day';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "CacheStatus".
 */
export type CacheStatus = 'hit' | 'miss';
/**
 * One change a write made, as the chat page applies it.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "CalendarChange".
 */
export type CalendarChange =
  | {
      event: CalendarEvent;
      op: 'upsert';
    }
  | {
      event_id: EventId;
      op: 'delete';
    };
/**
 * A date (2026-12-01, all-day) or an RFC 3339 instant in UTC (2026-12-01T09:00:00Z).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EventTime".
 */
export type EventTime = string;
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EventId".
 */
export type EventId = string;
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ProjectId".
 */
export type ProjectId = string;
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EntityId".
 */
export type EntityId = string;
/**
 * One thing a write changed.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Change".
 */
export type Change =
  | {
      entity: Record;
      id: string;
      kind: RecordKind;
      op: 'created';
    }
  | {
      entity: Record;
      id: string;
      kind: RecordKind;
      op: 'updated';
    }
  | {
      id: string;
      kind: RecordKind;
      op: 'deleted';
    }
  | {
      edge: Edge;
      op: 'linked';
    }
  | {
      edge: Edge;
      op: 'unlinked';
    };
/**
 * A record in a change: a project or an entity.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Record".
 */
export type Record = Entity | Project;
/**
 * One entity of a project, as stored and as answered.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Entity".
 */
export type Entity = EntityFields & {
  /**
   * Documents only, and only when one document is read by id: the content.
   */
  content?: string | null;
  /**
   * Documents only: the content's length in bytes (UTF-8).
   */
  content_length?: number | null;
  created_at: number;
  id: EntityId;
  project_id: ProjectId;
  updated_at: number;
  /**
   * The entity's own version: 1 when created, bumped by each update. An
   * update's `If-Match` / `expected_version` is compared with it.
   */
  version: number;
};
/**
 * The kind-specific fields of an entity: `{"kind": "task", "fields": {...}}`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EntityFields".
 */
export type EntityFields =
  | {
      fields: DocumentFields;
      kind: 'document';
    }
  | {
      fields: TaskFields;
      kind: 'task';
    }
  | {
      fields: GoalFields;
      kind: 'goal';
    }
  | {
      fields: PlanFields;
      kind: 'plan';
    }
  | {
      fields: MilestoneFields;
      kind: 'milestone';
    }
  | {
      fields: RiskFields;
      kind: 'risk';
    }
  | {
      fields: RequirementFields;
      kind: 'requirement';
    };
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Description".
 */
export type Description = string | null;
/**
 * A name or title: not blank.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Name".
 */
export type Name = string;
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "TaskState".
 */
export type TaskState = 'todo' | 'in_progress' | 'blocked' | 'done';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "GoalState".
 */
export type GoalState = 'active' | 'draft' | 'achieved' | 'abandoned';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "PlanState".
 */
export type PlanState = 'draft' | 'active' | 'completed' | 'cancelled';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MilestoneState".
 */
export type MilestoneState = 'pending' | 'in_progress' | 'completed' | 'missed';
/**
 * How bad a risk would be.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Impact".
 */
export type Impact = 'medium' | 'low' | 'high' | 'critical';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RiskState".
 */
export type RiskState = 'open' | 'mitigated' | 'accepted' | 'closed';
/**
 * MoSCoW priority of a requirement.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Priority".
 */
export type Priority = 'should' | 'must' | 'could' | 'wont';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RequirementState".
 */
export type RequirementState = 'proposed' | 'accepted' | 'implemented' | 'rejected';
/**
 * A project's lifecycle.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ProjectState".
 */
export type ProjectState = 'active' | 'planning' | 'paused' | 'completed' | 'archived';
/**
 * What a change or a search hit is about: a project or one of its entities.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RecordKind".
 */
export type RecordKind = 'project' | 'document' | 'task' | 'goal' | 'plan' | 'milestone' | 'risk' | 'requirement';
/**
 * The kinds of entity that live inside a project.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EntityKind".
 */
export type EntityKind = 'document' | 'task' | 'goal' | 'plan' | 'milestone' | 'risk' | 'requirement';
/**
 * What the turn did about an answer that did not match its steps.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "CheckVerdict".
 */
export type CheckVerdict = 'asked_again' | 'corrected';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MismatchKind".
 */
export type MismatchKind = 'claimed_not_done' | 'done_but_denied' | 'no_answer' | 'left_out';
/**
 * The scope of a chat (CURRENT_FLOW_AND_GAPS §5.1). `general` is accepted and
 * normalised to `global`; anything else unknown is refused with a 400.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ContextType".
 */
export type ContextType =
  | 'global'
  | 'project'
  | 'entity'
  | 'calendar'
  | 'project_create'
  | 'project_audit'
  | 'project_forecast'
  | 'daily_brief_update'
  | 'ontology'
  | 'brain_dump';
/**
 * Why an answer was cut off before its end.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "CutReason".
 */
export type CutReason = 'length' | 'repetition';
/**
 * How a turn ended, carried by `done`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DoneReason".
 */
export type DoneReason = 'complete' | 'error' | 'stopped' | 'cut_off';
/**
 * Which part of a series a change or delete applies to.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EditScope".
 */
export type EditScope = 'instance' | 'following' | 'series';
/**
 * Why an event was left out of a listing, free time or the agenda.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SkipReason".
 */
export type SkipReason = 'unreadable' | 'too_large' | 'unexpandable';
/**
 * An IANA time zone name, e.g. Europe/Berlin.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Zone".
 */
export type Zone = string;
/**
 * Where a search term was found.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MatchedIn".
 */
export type MatchedIn = 'name' | 'description' | 'content';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MessageStatus".
 */
export type MessageStatus = 'complete' | 'error' | 'stopped' | 'cut_off';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Role".
 */
export type Role = 'system' | 'user' | 'assistant' | 'tool';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "OperationAction".
 */
export type OperationAction = 'list' | 'search' | 'read' | 'create' | 'update' | 'delete';
/**
 * Where a step of a tool call is: begun, or ended well or not.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "OperationStatus".
 */
export type OperationStatus = 'start' | 'success' | 'error';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SessionId".
 */
export type SessionId = string;
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SessionStatus".
 */
export type SessionStatus = 'active' | 'closed';
/**
 * Why the scope moved.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ShiftReason".
 */
export type ShiftReason = 'project_created';
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "StepStatus".
 */
export type StepStatus = 'pending' | 'done' | 'failed' | 'waiting_for_approval' | 'skipped';
/**
 * Every event a turn sends. `type` is the tag on the wire.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "StreamEvent".
 */
export type StreamEvent =
  | {
      details?: string | null;
      state: AgentActivity;
      type: 'agent_state';
    }
  | {
      session: SessionView;
      type: 'session';
    }
  | {
      current: Focus;
      previous: Focus;
      type: 'focus_changed';
    }
  | {
      content: string;
      type: 'text_delta';
    }
  | {
      /**
       * Who made the call: the planner, or a plan step's executor.
       */
      origin?:
        | {
            source: 'planner';
          }
        | {
            plan_id: string;
            source: 'plan_step';
            step_id: string;
          };
      tool_call: ToolCall;
      type: 'tool_call';
    }
  | {
      name: string;
      ok: boolean;
      origin?: ToolOrigin;
      /**
       * A bounded preview of the result, not the whole output.
       */
      preview: string;
      tool_call_id: string;
      type: 'tool_result';
    }
  | {
      action: OperationAction;
      entity_id?: string | null;
      entity_name: string;
      entity_type: string;
      status: OperationStatus;
      /**
       * The step in a sentence, where names alone do not say it
       * ("Moved Design review to Tue 1 Dec 10:00").
       */
      summary?: string | null;
      type: 'operation';
    }
  | {
      patch: CalendarPatch;
      type: 'calendar_patch';
    }
  | {
      patch: EntityPatch;
      type: 'entity_patch';
    }
  | (ContextUsage & {
      type: 'context_usage';
    })
  | {
      code: string;
      message: string;
      /**
       * True when sending the same request again may succeed.
       */
      retryable: boolean;
      type: 'error';
    }
  | {
      reason: DoneReason;
      /**
       * This request repeated a `stream_run_id`: what came before `done`
       * is that turn's stream (or stored outcome), replayed or followed,
       * and `turn_id` is that turn's. Absent (false) on a turn that ran.
       */
      replayed?: boolean;
      session_id?: null | SessionId;
      turn_id: TurnId;
      type: 'done';
      usage?: null | Usage;
    }
  | {
      plan: AgentPlan;
      plan_id: string;
      type: 'plan_created';
    }
  | {
      plan_id: string;
      type: 'plan_ready_for_review';
    }
  | {
      approved: boolean;
      plan_id: string;
      reason: string;
      type: 'plan_review';
    }
  | {
      plan_id: string;
      step_id: string;
      title: string;
      type: 'step_start';
    }
  | {
      executor: ExecutorKind;
      plan_id: string;
      step_id: string;
      tools: string[];
      type: 'executor_spawned';
    }
  | {
      ok: boolean;
      plan_id: string;
      step_id: string;
      summary: string;
      type: 'executor_result';
    }
  | {
      error?: string | null;
      outputs: StepOutputs;
      plan_id: string;
      status: StepStatus;
      step_id: string;
      type: 'step_complete';
    }
  | {
      approval_id: string;
      arguments: {};
      /**
       * Ms since the epoch; after it the call counts as denied.
       */
      expires_at: number;
      /**
       * Where a tool event comes from: the planner's own loop, or one plan step's
       * executor (gap 4 of CURRENT_FLOW §9).
       */
      origin?:
        | {
            source: 'planner';
          }
        | {
            plan_id: string;
            source: 'plan_step';
            step_id: string;
          };
      summary: string;
      tool: string;
      tool_call_id: string;
      type: 'approval_required';
    }
  | {
      approval_id: string;
      approved: boolean;
      reason?: string | null;
      tool: string;
      tool_call_id: string;
      type: 'approval_answered';
    }
  | {
      questions: string[];
      type: 'clarifying_questions';
    }
  | {
      current: Focus;
      /**
       * The human name of what the conversation moved to.
       */
      entity_name: string;
      reason: ShiftReason;
      type: 'context_shift';
    }
  | {
      mismatches: ClaimMismatch[];
      type: 'answer_check';
      verdict: CheckVerdict;
    }
  | {
      reason: CutReason;
      type: 'cut_off';
    }
  | ((
      | {
          context_type: ContextType;
          kind: 'tool_selection';
          offered: string[];
          scope: string;
        }
      | {
          kind: 'tool_selection_miss';
          tool: string;
        }
      | {
          duration_ms: number;
          kind: 'tool_execution';
          ok: boolean;
          tool: string;
          tool_call_id: string;
        }
      | {
          duration_ms: number;
          kind: 'plan_step';
          ok: boolean;
          plan_id: string;
          step_id: string;
        }
    ) & {
      type: 'telemetry';
    })
  | (DebugContext1 & {
      type: 'debug_context';
    });
/**
 * Where a tool event comes from: the planner's own loop, or one plan step's
 * executor (gap 4 of CURRENT_FLOW §9).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ToolOrigin".
 */
export type ToolOrigin =
  | {
      source: 'planner';
    }
  | {
      plan_id: string;
      source: 'plan_step';
      step_id: string;
    };
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "TurnId".
 */
export type TurnId = string;
/**
 * One measurement of a turn (dev only), tagged by `kind`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Telemetry".
 */
export type Telemetry =
  | {
      context_type: ContextType;
      kind: 'tool_selection';
      offered: string[];
      scope: string;
    }
  | {
      kind: 'tool_selection_miss';
      tool: string;
    }
  | {
      duration_ms: number;
      kind: 'tool_execution';
      ok: boolean;
      tool: string;
      tool_call_id: string;
    }
  | {
      duration_ms: number;
      kind: 'plan_step';
      ok: boolean;
      plan_id: string;
      step_id: string;
    };

export interface WireTypes {
  AgentActivity?: AgentActivity;
  AgentPlan?: AgentPlan;
  ApprovalSettings?: ApprovalSettings;
  ApprovalSettingsView?: ApprovalSettingsView;
  BudgetKind?: BudgetKind;
  BudgetUsage?: BudgetUsage;
  CacheStatus?: CacheStatus;
  CalendarChange?: CalendarChange;
  CalendarEvent?: CalendarEvent;
  CalendarPatch?: CalendarPatch;
  Change?: Change;
  CheckVerdict?: CheckVerdict;
  ClaimMismatch?: ClaimMismatch;
  ContextType?: ContextType;
  ContextUsage?: ContextUsage;
  CreatedProject?: CreatedProject;
  CutReason?: CutReason;
  DebugContext?: DebugContext;
  DebugTokens?: DebugTokens;
  DeleteAnswer?: DeleteAnswer;
  Deleted?: Deleted;
  Description?: Description;
  DocNode?: DocNode;
  DocStructure?: DocStructure;
  DocumentFields?: DocumentFields;
  DocumentMetadata?: DocumentMetadata;
  DocumentPatch?: DocumentPatch;
  DoneReason?: DoneReason;
  Edge?: Edge;
  EdgeEnd?: EdgeEnd;
  EdgeList?: EdgeList;
  EditScope?: EditScope;
  Entity?: Entity;
  EntityFields?: EntityFields;
  EntityId?: EntityId;
  EntityKind?: EntityKind;
  EntityPatch?: EntityPatch;
  Error?: Error;
  ErrorBody?: ErrorBody;
  ErrorDetail?: ErrorDetail;
  EventChanges?: EventChanges;
  EventDeleted?: EventDeleted;
  EventId?: EventId;
  EventInstance?: EventInstance;
  EventList?: EventList;
  EventTime?: EventTime;
  ExecutorKind?: ExecutorKind;
  Focus?: Focus;
  FreeSlot?: FreeSlot;
  FreeSlots?: FreeSlots;
  FunctionCall?: FunctionCall;
  GoalFields?: GoalFields;
  GoalPatch?: GoalPatch;
  GoalState?: GoalState;
  Impact?: Impact;
  InstanceOverride?: InstanceOverride;
  MatchedIn?: MatchedIn;
  MessageError?: MessageError;
  MessageStatus?: MessageStatus;
  MessageView?: MessageView;
  MessagesPage?: MessagesPage;
  MetadataRequest?: MetadataRequest;
  MetadataResponse?: MetadataResponse;
  MilestoneFields?: MilestoneFields;
  MilestonePatch?: MilestonePatch;
  MilestoneState?: MilestoneState;
  MismatchKind?: MismatchKind;
  MoveDocument?: MoveDocument;
  Name?: Name;
  NewDocument?: NewDocument;
  NewEvent?: NewEvent;
  NewProject?: NewProject;
  OperationAction?: OperationAction;
  OperationStatus?: OperationStatus;
  Organizer?: Organizer1;
  PendingApproval?: PendingApproval1;
  PlanFields?: PlanFields;
  PlanMode?: PlanMode;
  PlanPatch?: PlanPatch;
  PlanStage?: PlanStage;
  PlanState?: PlanState;
  PlanStep?: PlanStep;
  PlanStepRef?: PlanStepRef1;
  Priority?: Priority;
  Project?: Project;
  ProjectFields?: ProjectFields;
  ProjectId?: ProjectId;
  ProjectPatch?: ProjectPatch;
  ProjectState?: ProjectState;
  Record?: Record;
  RecordKind?: RecordKind;
  Recurrence?: Recurrence;
  RecurrenceInput?: RecurrenceInput1;
  RemoteRef?: RemoteRef;
  RenameSession?: RenameSession;
  Reorganize?: Reorganize;
  Reorganized?: Reorganized;
  RequirementFields?: RequirementFields;
  RequirementPatch?: RequirementPatch;
  RequirementState?: RequirementState;
  RiskFields?: RiskFields;
  RiskPatch?: RiskPatch;
  RiskState?: RiskState;
  Role?: Role;
  SearchHit?: SearchHit;
  SearchResults?: SearchResults;
  SessionId?: SessionId;
  SessionList?: SessionList;
  SessionStatus?: SessionStatus;
  SessionView?: SessionView;
  ShiftReason?: ShiftReason;
  SkipReason?: SkipReason;
  SkippedEvent?: SkippedEvent;
  StageMode?: StageMode;
  StepIntent?: StepIntent;
  StepOutputs?: StepOutputs;
  StepStatus?: StepStatus;
  StopAnswer?: StopAnswer;
  StopRequest?: StopRequest;
  StoredOperation?: StoredOperation;
  StreamEvent?: StreamEvent;
  SuggestionRequest?: SuggestionRequest;
  TaskFields?: TaskFields;
  TaskPatch?: TaskPatch;
  TaskState?: TaskState;
  Telemetry?: Telemetry;
  ToolCall?: ToolCall;
  ToolCallView?: ToolCallView;
  ToolOrigin?: ToolOrigin;
  TurnId?: TurnId;
  TurnRequest?: TurnRequest;
  Usage?: Usage;
  UserSettings?: UserSettings;
  Zone?: Zone;
}
/**
 * The arguments of `agent_create_plan`: the plan as the model writes it.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "AgentPlan".
 */
export interface AgentPlan {
  constraints?: string[];
  /**
   * What the whole plan achieves.
   */
  goal: string;
  mode?: PlanMode;
  /**
   * Run in order; the steps of a `parallel` stage run at the same time.
   */
  stages: PlanStage[];
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "PlanStage".
 */
export interface PlanStage {
  id: string;
  mode: StageMode;
  name: string;
  steps: PlanStep[];
}
/**
 * One unit of work, run by one executor. The model may leave `intent` and
 * `executor` out ([`StepAsWritten`]): the plan tool does not offer them, as
 * the local model filled a two-step plan with invented "research / review /
 * edit the draft" steps led by those two fields and never closed the call.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "PlanStep".
 */
export interface PlanStep {
  executor: ExecutorKind;
  /**
   * Unique in the plan, e.g. "s1".
   */
  id: string;
  /**
   * Ids of earlier steps whose results this step reads.
   */
  inputs?: string[];
  intent: StepIntent;
  /**
   * What the step should produce (e.g. "summary document").
   */
  outputs?: string[];
  /**
   * What the step does, in a few words (shown to the user).
   */
  title: string;
  /**
   * The tools this step's executor may call (names of this conversation's tools).
   */
  tools?: string[];
}
/**
 * The stored record and the body of `PUT /me/approvals`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ApprovalSettings".
 */
export interface ApprovalSettings {
  ask_first?: (
    | 'create_project'
    | 'update_project'
    | 'create_onto_project'
    | 'create_document'
    | 'create_task'
    | 'create_goal'
    | 'create_plan'
    | 'create_milestone'
    | 'create_risk'
    | 'create_requirement'
    | 'update_entity'
    | 'delete_entity'
    | 'link_entities'
    | 'unlink_entities'
    | 'move_document'
    | 'reorganize_project'
    | 'create_calendar_event'
    | 'update_calendar_event'
    | 'delete_calendar_event'
    | 'propose_entities'
  )[];
}
/**
 * What `GET`/`PUT /me/approvals` answer.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ApprovalSettingsView".
 */
export interface ApprovalSettingsView {
  ask_first: string[];
  /**
   * Every tool that may be set to ask first, in a stable order.
   */
  askable: string[];
}
/**
 * The user's use and limits (`GET /me/usage`). A limit of 0 is no limit.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "BudgetUsage".
 */
export interface BudgetUsage {
  /**
   * When a budget that is spent now lets the user go on (ms since the
   * epoch); `None`: nothing is spent.
   */
  blocked_until_ms?: number | null;
  concurrent_limit: number;
  /**
   * Turns holding a slot now (expired slots of crashed turns not counted).
   */
  concurrent_turns: number;
  /**
   * The UTC day the daily counts are for (`YYYY-MM-DD`).
   */
  day: string;
  /**
   * When the daily counts start again (ms since the epoch, UTC midnight).
   */
  day_resets_at_ms: number;
  tokens_per_day: number;
  tokens_today: number;
  turns_per_minute: number;
  turns_this_minute: number;
  web_calls_per_day: number;
  web_calls_today: number;
}
/**
 * A stored event: a single event, or a series (with `recurrence`).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "CalendarEvent".
 */
export interface CalendarEvent {
  /**
   * Milliseconds since the Unix epoch.
   */
  created_at: number;
  description?: string | null;
  end: EventTime;
  id: EventId;
  location?: string | null;
  organizer?: null | Organizer;
  overrides?: InstanceOverride[];
  project_id?: null | ProjectId;
  recurrence?: null | Recurrence;
  remote?: null | RemoteRef;
  /**
   * A date (2026-12-01, all-day) or an RFC 3339 instant in UTC (2026-12-01T09:00:00Z).
   */
  start: string;
  task_id?: null | EntityId;
  /**
   * The zone the event was made in: its wall-clock time recurs there.
   */
  timezone: string;
  title: string;
  /**
   * The iCalendar `UID` (the CalDAV server's name for it).
   */
  uid: string;
  updated_at: number;
  /**
   * Bumped by every write; `If-Match` compares against it.
   */
  version: number;
}
/**
 * iCalendar `ORGANIZER`, kept and written back as read.
 */
export interface Organizer {
  /**
   * The cal-address as the server wrote it (`mailto:bob@example.com`).
   */
  address: string;
  /**
   * `CN`, when given.
   */
  name?: string | null;
  /**
   * The user themselves (the address names their CalDAV account's
   * username); `false`: someone else's event, whose changes wait for the
   * user's yes (docs/chat-protocol.md#approvals).
   */
  own?: boolean;
}
/**
 * One instance of a series changed or cancelled on its own (RFC 5545
 * `RECURRENCE-ID`): `recurrence_id` is the instance's original start.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "InstanceOverride".
 */
export interface InstanceOverride {
  cancelled?: boolean;
  description?: string | null;
  end?: null | EventTime;
  location?: string | null;
  recurrence_id: EventTime;
  start?: null | EventTime;
  title?: string | null;
}
/**
 * An RFC 5545 recurrence: the `RRULE` value (without `RRULE:`), and the
 * excluded and added starts (in the event's own kind: dates for all-day
 * events, instants otherwise).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Recurrence".
 */
export interface Recurrence {
  exdates?: EventTime[];
  rdates?: EventTime[];
  /**
   * e.g. `FREQ=WEEKLY;BYDAY=MO`.
   */
  rrule: string;
}
/**
 * Where the event lives on the user's CalDAV server, and the ETag we last
 * saw there (every write is conditioned on it).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RemoteRef".
 */
export interface RemoteRef {
  etag: string;
  href: string;
}
/**
 * What a calendar write changed: the `calendar_patch` event's payload.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "CalendarPatch".
 */
export interface CalendarPatch {
  changes: CalendarChange[];
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DocumentFields".
 */
export interface DocumentFields {
  description?: Description;
  title: Name;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "TaskFields".
 */
export interface TaskFields {
  description?: Description;
  /**
   * Milliseconds since the Unix epoch.
   */
  due_at?: number | null;
  /**
   * 1 (highest) to 5.
   */
  priority?: number | null;
  state?: TaskState;
  title: Name;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "GoalFields".
 */
export interface GoalFields {
  description?: Description;
  name: Name;
  state?: GoalState;
  /**
   * Milliseconds since the Unix epoch.
   */
  target_at?: number | null;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "PlanFields".
 */
export interface PlanFields {
  description?: Description;
  name: Name;
  state?: PlanState;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MilestoneFields".
 */
export interface MilestoneFields {
  description?: Description;
  /**
   * Milliseconds since the Unix epoch.
   */
  due_at?: number | null;
  state?: MilestoneState;
  title: Name;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RiskFields".
 */
export interface RiskFields {
  description?: Description;
  impact?: null | Impact;
  state?: RiskState;
  title: Name;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RequirementFields".
 */
export interface RequirementFields {
  description?: Description;
  name: Name;
  priority?: null | Priority;
  state?: RequirementState;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Project".
 */
export interface Project {
  /**
   * The project's "where we left off" document, created with it.
   */
  context_document_id: string;
  /**
   * Milliseconds since the Unix epoch.
   */
  created_at: number;
  description?: Description;
  id: ProjectId;
  name: string;
  state: ProjectState;
  updated_at: number;
  /**
   * The project's change counter: bumped by every write to the project or
   * anything in it. Caches compare against it.
   */
  version: number;
}
/**
 * A directed, named relation between two entities of one project. Edges are
 * explicit: creating an entity never creates one.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Edge".
 */
export interface Edge {
  from: EdgeEnd;
  /**
   * Lowercase letters, digits and `_`, starting with a letter (e.g. `supports`, `blocks`).
   */
  relation: string;
  to: EdgeEnd;
}
/**
 * One end of an edge.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EdgeEnd".
 */
export interface EdgeEnd {
  id: EntityId;
  kind: EntityKind;
}
/**
 * An answer's word that the turn's steps contradict.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ClaimMismatch".
 */
export interface ClaimMismatch {
  /**
   * The kind of change: `create`, `update` or `delete`.
   */
  action: 'list' | 'search' | 'read' | 'create' | 'update' | 'delete';
  /**
   * The step's title, when the answer named one.
   */
  entity_name?: string | null;
  kind: MismatchKind;
  /**
   * The mismatch in a sentence, for the user.
   */
  note: string;
  /**
   * The words of the answer that claim or deny it.
   */
  quote: string;
}
/**
 * The budget the context builder worked with and what it kept.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ContextUsage".
 */
export interface ContextUsage {
  cache?: null | ('hit' | 'miss');
  /**
   * Log messages left out for the budgets (not those the summary covers).
   */
  messages_dropped: number;
  /**
   * Log messages sent, the current one included.
   */
  messages_kept: number;
  summary_used: boolean;
  /**
   * `CONTEXT_MAX_TOKENS`.
   */
  token_budget: number;
  /**
   * The request in the model's tokens, tool definitions included, as
   * calibrated by its earlier reports (`context::TokenCalibration`).
   */
  tokens_used: number;
}
/**
 * What `POST /projects` created.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "CreatedProject".
 */
export interface CreatedProject {
  edges_created: Edge[];
  /**
   * The context document (and any other entity a compound create makes).
   */
  entities_created: Entity[];
  project: Project;
}
/**
 * What the context builder made of this turn's log (dev only). Seqs are the
 * log's message numbers; token counts are ours (`CONTEXT_TOKENIZER`) except
 * `model_total`, the calibrated estimate `context_usage` reports.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DebugContext".
 */
export interface DebugContext {
  chars_used: number;
  /**
   * Left out for the budgets or the tool-call protocol.
   */
  dropped: number[];
  /**
   * Log messages sent, in order, the current one last.
   */
  kept: number[];
  /**
   * The context pack's scope (`global`, `project`, `entity`); absent without a pack.
   */
  pack_scope?: string | null;
  /**
   * Not sent because the summary covers them.
   */
  summarized: number[];
  summary_used: boolean;
  tokens: DebugTokens;
  /**
   * False when the system prompt, summary and current message alone are over a budget.
   */
  within_budget: boolean;
}
/**
 * Where the request's tokens go.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DebugTokens".
 */
export interface DebugTokens {
  agent_state: number;
  /**
   * `CONTEXT_MAX_TOKENS`.
   */
  budget: number;
  /**
   * Messages and tools, as we count them.
   */
  counted_total: number;
  current: number;
  /**
   * The kept history before the current message.
   */
  history: number;
  /**
   * The same in the model's tokens, as calibrated (`context_usage.tokens_used`).
   */
  model_total: number;
  /**
   * Of which the context pack's JSON and the agent state block.
   */
  pack: number;
  summary: number;
  /**
   * The whole system prompt, pack and agent state included.
   */
  system_prompt: number;
  /**
   * The tool definitions offered.
   */
  tools: number;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DeleteAnswer".
 */
export interface DeleteAnswer {
  items_deleted: number;
  message: string;
  status: string;
}
/**
 * What a delete removed.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Deleted".
 */
export interface Deleted {
  /**
   * Edges removed with the entity.
   */
  edges_removed: Edge[];
  id: string;
  kind: RecordKind;
}
/**
 * One node of the document tree: hierarchy only, never content.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DocNode".
 */
export interface DocNode {
  children?: DocNode[];
  id: EntityId;
  /**
   * Canonical sibling order: 0, 1, 2, ... among the parent's children.
   */
  order: number;
}
/**
 * A project's `doc_structure`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DocStructure".
 */
export interface DocStructure {
  root: DocNode[];
  /**
   * The project version this tree was read at.
   */
  version: number;
}
/**
 * What is known about a document without reading its content.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DocumentMetadata".
 */
export interface DocumentMetadata {
  content_length: number;
  description?: Description;
  id: EntityId;
  title: string;
  updated_at: number;
}
/**
 * A partial update of DocumentFields: only the fields sent change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "DocumentPatch".
 */
export interface DocumentPatch {
  /**
   * At most 2097152 bytes of UTF-8 (larger is 413 too_large).
   */
  content?: string;
  description?: Description;
  /**
   * The version last seen (as `If-Match`); if both are sent they must agree.
   */
  expected_version?: number | null;
  title?: Name;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EdgeList".
 */
export interface EdgeList {
  items: Edge[];
}
/**
 * The backend's truth after one write, as the client (and the chat stream's
 * `entity_patch` event) receives it: apply `changes` in order; when
 * `doc_structure` is present it replaces the project's tree. `version` is the
 * project's version after the write; a client holding an older one can apply
 * this, one holding a newer one ignores it.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EntityPatch".
 */
export interface EntityPatch {
  changes: Change[];
  doc_structure?: null | DocStructure;
  project_id: ProjectId;
  version: number;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Error".
 */
export interface Error {
  error: {
    /**
     * Stable, machine-readable. `invalid_json` (400): the body is not JSON, is JSON but not an object, or is missing; `missing_field` (400): a required field is absent (or null in an update); `unknown_field` (400): a field this body does not have; `wrong_type` (400): a field has the wrong JSON type; `invalid_value` (400): a value outside what this document allows; `invalid_id` (400): a malformed id (path, query or body); `unknown_kind` (400): a kind that is not one of the seven; `invalid_time` (400): not a date, a local time or an instant; or a local time the clocks skip; `invalid_timezone` (400): not an IANA time zone name; `end_before_start` (400): an event's end, or a range's `to`, is not after its start; `invalid_rrule` (400): not an RFC 5545 RRULE, or one that repeats without end too often; `range_too_long` (400): a range over 366 days; `range_not_covered` (400): free time over a range in which an event repeats too often to expand whole: ask for a shorter one; `not_recurring` (400): `instance` names an occurrence of an event that does not repeat; `link_not_found` (400): the event's `project_id` / `task_id` is not the user's; `missing_token` (401): no bearer token; `invalid_token` (401): the token is malformed or its signature is wrong; `token_expired` (401): the token has expired; `token_not_yet_valid` (401): the token is not valid yet; `invalid_issuer` (401): the token's issuer is not the configured one; `invalid_audience` (401): the token's audience is not the configured one; `invalid_subject` (401): the token's subject is not a valid user id; `auth_not_configured` (401): the server has no way to check tokens; `project_not_found` (404): missing, being deleted, or another user's; `entity_not_found` (404): missing, being deleted, or another user's; `edge_not_found` (404): no such edge; `event_not_found` (404): missing, deleted, or another user's; `instance_not_found` (404): the series has no instance starting at `instance`; `cursor_not_found` (404): the cursor's project is gone: list from the start again; `route_not_found` (404): no such route; `method_not_allowed` (405): the route does not take this method (`Allow` lists those it takes); `version_conflict` (409): the version sent is not the current one (`current_version`); nothing was written; `edge_exists` (409): this edge already exists; `context_document_protected` (409): a project's context document cannot be deleted; `calendar_conflict` (409): the event changed on the user's calendar server since it was read; nothing was written; `too_large` (413): the body is over 3 MiB, or a content over 2 MiB; `too_many_changes` (400): a reorganize naming more edge changes than its one transaction holds (see `Reorganize`); nothing was written; `edge_endpoint_not_found` (422): an edge end is not an entity of this project (of that kind); `edge_self_loop` (422): an edge needs two different entities; `parent_not_found` (422): the parent document is not in this project's tree; `tree_cycle` (422): a document cannot move under itself or its descendant; `store_corrupt` (500): a stored record cannot be read; `calendar_server_error` (502): the user's calendar server failed or refused; `project_busy` (503): concurrent writes kept winning: retry; `store_unavailable` (503): the store did not answer: retry; `jwks_unavailable` (503): the token keys could not be fetched: retry.
     */
    code:
      | 'invalid_json'
      | 'missing_field'
      | 'unknown_field'
      | 'wrong_type'
      | 'invalid_value'
      | 'invalid_id'
      | 'unknown_kind'
      | 'invalid_time'
      | 'invalid_timezone'
      | 'end_before_start'
      | 'invalid_rrule'
      | 'range_too_long'
      | 'range_not_covered'
      | 'not_recurring'
      | 'link_not_found'
      | 'missing_token'
      | 'invalid_token'
      | 'token_expired'
      | 'token_not_yet_valid'
      | 'invalid_issuer'
      | 'invalid_audience'
      | 'invalid_subject'
      | 'auth_not_configured'
      | 'project_not_found'
      | 'entity_not_found'
      | 'edge_not_found'
      | 'event_not_found'
      | 'instance_not_found'
      | 'cursor_not_found'
      | 'route_not_found'
      | 'method_not_allowed'
      | 'version_conflict'
      | 'edge_exists'
      | 'context_document_protected'
      | 'calendar_conflict'
      | 'too_large'
      | 'too_many_changes'
      | 'edge_endpoint_not_found'
      | 'edge_self_loop'
      | 'parent_not_found'
      | 'tree_cycle'
      | 'store_corrupt'
      | 'calendar_server_error'
      | 'project_busy'
      | 'store_unavailable'
      | 'jwks_unavailable';
    /**
     * `version_conflict` only: the version to retry with.
     */
    current_version?: number;
    message: string;
  };
}
/**
 * The JSON body of every error answered over plain HTTP.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ErrorBody".
 */
export interface ErrorBody {
  error: ErrorDetail;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ErrorDetail".
 */
export interface ErrorDetail {
  /**
   * Machine-readable, stable.
   */
  code: string;
  message: string;
}
/**
 * `PATCH /events/{id}` and `update_calendar_event`: the fields to change.
 * Moving `start` alone keeps the duration. An empty `location` or
 * `description` clears it.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EventChanges".
 */
export interface EventChanges {
  description?: string | null;
  duration_minutes?: number | null;
  end?: string | null;
  location?: string | null;
  recurrence?: null | RecurrenceInput;
  start?: string | null;
  timezone?: string | null;
  title?: string | null;
}
/**
 * The whole series only.
 */
export interface RecurrenceInput {
  exdates?: string[];
  rdates?: string[];
  /**
   * e.g. `FREQ=WEEKLY;BYDAY=TU` (RFC 5545; `RRULE:` prefix optional).
   */
  rrule: string;
}
/**
 * What `DELETE /events/{event_id}` did: the whole event went (`deleted`),
 * or, for an instance or "this and following" of a series, what remains.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EventDeleted".
 */
export interface EventDeleted {
  /**
   * The whole event (or series) is gone.
   */
  deleted: boolean;
  event?: null | CalendarEvent1;
  event_id: EventId;
}
/**
 * A stored event: a single event, or a series (with `recurrence`).
 */
export interface CalendarEvent1 {
  /**
   * Milliseconds since the Unix epoch.
   */
  created_at: number;
  description?: string | null;
  end: EventTime;
  id: EventId;
  location?: string | null;
  organizer?: null | Organizer;
  overrides?: InstanceOverride[];
  project_id?: null | ProjectId;
  recurrence?: null | Recurrence;
  remote?: null | RemoteRef;
  /**
   * A date (2026-12-01, all-day) or an RFC 3339 instant in UTC (2026-12-01T09:00:00Z).
   */
  start: string;
  task_id?: null | EntityId;
  /**
   * The zone the event was made in: its wall-clock time recurs there.
   */
  timezone: string;
  title: string;
  /**
   * The iCalendar `UID` (the CalDAV server's name for it).
   */
  uid: string;
  updated_at: number;
  /**
   * Bumped by every write; `If-Match` compares against it.
   */
  version: number;
}
/**
 * One occurrence as a listing shows it, in the listing's zone.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EventInstance".
 */
export interface EventInstance {
  all_day: boolean;
  description?: string | null;
  end: string;
  event_id: EventId;
  instance?: null | string;
  location?: string | null;
  project_id?: null | ProjectId;
  recurring: boolean;
  /**
   * A date (all-day) or the local time with its offset.
   */
  start: string;
  task_id?: null | EntityId;
  title: string;
  version: number;
}
/**
 * A listing over a range, in one zone. Listings are bounded: at most
 * `MAX_INSTANCES`; `truncated` says when more exist. Events that cannot be
 * read or expanded are left out and named in `skipped`; everything else is
 * listed.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "EventList".
 */
export interface EventList {
  events: EventInstance[];
  from: string;
  /**
   * What was left out, and why (absent when nothing was).
   */
  skipped?: SkippedEvent[];
  timezone: Zone;
  to: string;
  truncated: boolean;
}
/**
 * One event left out, named as well as it can be: by `event_id` when we
 * hold it, by the calendar server's `href` when we could not take it in.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SkippedEvent".
 */
export interface SkippedEvent {
  /**
   * What went wrong, in words.
   */
  detail: string;
  event_id?: null | EventId;
  href?: string | null;
  reason: SkipReason;
  /**
   * Its `SUMMARY`, when that much could be read.
   */
  title?: string | null;
}
/**
 * Where a turn looks: its scope, entity and the client's focus metadata.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Focus".
 */
export interface Focus {
  context_type: ContextType;
  entity_id?: string | null;
  focus?: unknown;
}
/**
 * One free slot, as local times with their offset.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "FreeSlot".
 */
export interface FreeSlot {
  end: string;
  minutes: number;
  start: string;
}
/**
 * `GET /events/free` and `find_free_time`: the free slots, and the events
 * left out of the busy time because they could not be read (absent when
 * none were): time they would take may be shown free.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "FreeSlots".
 */
export interface FreeSlots {
  skipped?: SkippedEvent[];
  slots: FreeSlot[];
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "FunctionCall".
 */
export interface FunctionCall {
  /**
   * JSON text exactly as the model produced it (it may be invalid JSON).
   */
  arguments: string;
  name: string;
}
/**
 * A partial update of GoalFields: only the fields sent change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "GoalPatch".
 */
export interface GoalPatch {
  description?: Description;
  /**
   * The version last seen (as `If-Match`); if both are sent they must agree.
   */
  expected_version?: number | null;
  name?: Name;
  state?: null | GoalState;
  /**
   * Milliseconds since the Unix epoch.
   */
  target_at?: number | null;
}
/**
 * Marks an assistant message whose generation failed or was cut short.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MessageError".
 */
export interface MessageError {
  /**
   * Machine-readable, same vocabulary as the SSE `error` event's `code`.
   */
  code: string;
  message: string;
}
/**
 * A message in the shape a UI renders.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MessageView".
 */
export interface MessageView {
  /**
   * Where the answer's word and the turn's steps disagree
   * (docs/events.md, `answer_check`).
   */
  claim_mismatches?: ClaimMismatch[];
  content?: string | null;
  created_at: number;
  cut_off?: null | ('length' | 'repetition');
  error?: null | MessageError;
  id: string;
  /**
   * False on an answer withdrawn for claiming what no tool did: shown,
   * never sent to the model again.
   */
  in_context?: boolean;
  role: Role;
  seq: number;
  /**
   * `complete`, `error` (the content is partial; see `error`), `stopped`
   * (partial, by the user) or `cut_off` (partial: see `cut_off`).
   */
  status: 'complete' | 'error' | 'stopped' | 'cut_off';
  /**
   * A tool result whose call is on another page.
   */
  tool_call_id?: string | null;
  /**
   * An assistant's tool calls, each with its result's preview when it is on this page.
   */
  tool_calls?: ToolCallView[];
  /**
   * The turn that wrote it: the id of its answer in the AI SDK's protocol
   * (`POST /chat`'s `start.messageId`), so a client that shows the history
   * and then resumes the turn replaces the stored answer, not repeats it.
   */
  turn_id: string;
  /**
   * A user message dictated from voice notes: the id the client sent.
   */
  voice_note_group_id?: string | null;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ToolCallView".
 */
export interface ToolCallView {
  approval?: null | PendingApproval;
  arguments: string;
  id: string;
  name: string;
  /**
   * The steps the call took, in the live turn's words (with its result;
   * absent for calls stored before they were kept, and for calls that
   * take no step).
   */
  operations?: StoredOperation[];
  result_preview?: string | null;
}
/**
 * The call waited (or waits, without a result) for the user's yes.
 */
export interface PendingApproval {
  /**
   * HMAC over user, session, call id, tool, arguments' hash and expiry.
   */
  approval_id: string;
  /**
   * Ms since the epoch; after it the call is denied as expired.
   */
  expires_at: number;
  step?: null | PlanStepRef;
  /**
   * The operation in human words ("Delete the task \"Old checklist\"").
   */
  summary: string;
  tool: string;
  tool_call_id: string;
}
/**
 * A plan step's call ([`crate::planner`]): the executor that made it
 * waits in the plan record, and the answer resumes that step.
 */
export interface PlanStepRef {
  plan_id: string;
  step_id: string;
}
/**
 * A step of a tool call as the user saw it: its settled `operation` event
 * (docs/events.md#operation), kept with the call's result.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "StoredOperation".
 */
export interface StoredOperation {
  action: OperationAction;
  entity_id?: string | null;
  /**
   * The entity's name (a title, never its id when it could be read).
   */
  entity_name: string;
  entity_type: string;
  /**
   * `success` or `error`; `start` for a step that never ended.
   */
  status: 'start' | 'success' | 'error';
  /**
   * The step in a sentence ("Listed 3 events, 1–7 Dec").
   */
  summary?: string | null;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MessagesPage".
 */
export interface MessagesPage {
  /**
   * Chronological.
   */
  messages: MessageView[];
  /**
   * Pass as `after` for the next (newer) page; absent when this page reached the newest.
   */
  next_after?: number | null;
  /**
   * Pass as `before` for the previous (older) page; absent at the start.
   */
  next_before?: number | null;
}
/**
 * `POST /projects/{id}/documents/metadata`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MetadataRequest".
 */
export interface MetadataRequest {
  /**
   * @maxItems 100
   */
  document_ids: EntityId[];
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MetadataResponse".
 */
export interface MetadataResponse {
  /**
   * In request order; ids that are not documents of this project are left out.
   */
  documents: DocumentMetadata[];
}
/**
 * A partial update of MilestoneFields: only the fields sent change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MilestonePatch".
 */
export interface MilestonePatch {
  description?: Description;
  /**
   * Milliseconds since the Unix epoch.
   */
  due_at?: number | null;
  /**
   * The version last seen (as `If-Match`); if both are sent they must agree.
   */
  expected_version?: number | null;
  state?: null | MilestoneState;
  title?: Name;
}
/**
 * `POST /projects/{id}/doc-structure/move`: move a document (and its
 * subtree) under a new parent, or reorder it among its siblings.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "MoveDocument".
 */
export interface MoveDocument {
  document_id: EntityId;
  new_parent_id?: null | string;
  /**
   * Position among the siblings (0 is first); absent, or past the last, places it last.
   */
  position?: number | null;
}
/**
 * `POST /projects/{id}/documents`: a document and where it goes in the tree.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "NewDocument".
 */
export interface NewDocument {
  /**
   * At most 2097152 bytes of UTF-8 (larger is 413 too_large).
   */
  content?: string;
  description?: Description;
  parent_id?: null | string;
  /**
   * Position among the siblings (0 is first); absent, or past the last, places it last.
   */
  position?: number | null;
  title: Name;
}
/**
 * `POST /events` and `create_calendar_event`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "NewEvent".
 */
export interface NewEvent {
  description?: string | null;
  duration_minutes?: number | null;
  /**
   * Same forms as `start`; or give `duration_minutes`; default: one hour
   * (one day for all-day events).
   */
  end?: string | null;
  location?: string | null;
  project_id?: null | ProjectId;
  recurrence?: null | RecurrenceInput1;
  /**
   * `2026-12-01` (all-day), `2026-12-01T10:00` (local time in `timezone`)
   * or an instant with offset (`2026-12-01T10:00:00+01:00`).
   */
  start: string;
  task_id?: null | EntityId;
  /**
   * IANA zone of local times; default: the user's zone.
   */
  timezone?: string | null;
  title: string;
}
/**
 * A recurrence as input: the `RRULE` value and excluded/added starts in the
 * same forms as `start`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RecurrenceInput".
 */
export interface RecurrenceInput1 {
  exdates?: string[];
  rdates?: string[];
  /**
   * e.g. `FREQ=WEEKLY;BYDAY=TU` (RFC 5545; `RRULE:` prefix optional).
   */
  rrule: string;
}
/**
 * `POST /projects`: the project, and what its context document says.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "NewProject".
 */
export interface NewProject {
  /**
   * Content of the project's context document: purpose, vision and scope in the user's words. Empty when absent. At most 2 MiB of UTF-8 (larger is 413 too_large).
   */
  context?: string | null;
  description?: Description;
  name: Name;
  state?: ProjectState;
}
/**
 * Who organizes an event, from iCalendar `ORGANIZER` (events synced from a
 * calendar server; an event made here names none).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Organizer".
 */
export interface Organizer1 {
  /**
   * The cal-address as the server wrote it (`mailto:bob@example.com`).
   */
  address: string;
  /**
   * `CN`, when given.
   */
  name?: string | null;
  /**
   * The user themselves (the address names their CalDAV account's
   * username); `false`: someone else's event, whose changes wait for the
   * user's yes (docs/chat-protocol.md#approvals).
   */
  own?: boolean;
}
/**
 * A call that waits for the user's yes ([`crate::approval`]): what the
 * approval id signs is the call as stored in the same message (its
 * arguments are never taken from the client).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "PendingApproval".
 */
export interface PendingApproval1 {
  /**
   * HMAC over user, session, call id, tool, arguments' hash and expiry.
   */
  approval_id: string;
  /**
   * Ms since the epoch; after it the call is denied as expired.
   */
  expires_at: number;
  step?: null | PlanStepRef;
  /**
   * The operation in human words ("Delete the task \"Old checklist\"").
   */
  summary: string;
  tool: string;
  tool_call_id: string;
}
/**
 * A partial update of PlanFields: only the fields sent change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "PlanPatch".
 */
export interface PlanPatch {
  description?: Description;
  /**
   * The version last seen (as `If-Match`); if both are sent they must agree.
   */
  expected_version?: number | null;
  name?: Name;
  state?: null | PlanState;
}
/**
 * The plan step a waiting call belongs to.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "PlanStepRef".
 */
export interface PlanStepRef1 {
  plan_id: string;
  step_id: string;
}
/**
 * A project's own fields: its create body (with [`NewProject`]) and what a
 * `PATCH /projects/{id}` may change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ProjectFields".
 */
export interface ProjectFields {
  description?: Description;
  name: Name;
  state?: ProjectState;
}
/**
 * A partial update of ProjectFields: only the fields sent change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ProjectPatch".
 */
export interface ProjectPatch {
  description?: Description;
  /**
   * The version last seen (as `If-Match`); if both are sent they must agree.
   */
  expected_version?: number | null;
  name?: Name;
  state?: null | ProjectState;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RenameSession".
 */
export interface RenameSession {
  title: string;
}
/**
 * `POST /projects/{id}/reorganize`: moves in the document tree (re-parenting
 * or reordering) and edge changes, applied together in one transaction or
 * not at all. Moves go first, in order; then the unlinks, then the links.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Reorganize".
 */
export interface Reorganize {
  /**
   * The project version the caller read (`doc_structure.version`, a patch's `version`); another one is 409 version_conflict and nothing is written. Absent: the current version.
   */
  expected_version?: number | null;
  /**
   * `link` and `unlink` together name at most 4 edges (one transaction's worth); more is 400 too_many_changes. No edge may be named twice.
   *
   * @maxItems 4
   */
  link?: [] | [Edge] | [Edge, Edge] | [Edge, Edge, Edge] | [Edge, Edge, Edge, Edge];
  /**
   * Applied in order, each to the tree the one before left.
   *
   * @maxItems 100
   */
  moves?: MoveDocument[];
  /**
   * `link` and `unlink` together name at most 4 edges (one transaction's worth); more is 400 too_many_changes. No edge may be named twice.
   *
   * @maxItems 4
   */
  unlink?: [] | [Edge] | [Edge, Edge] | [Edge, Edge, Edge] | [Edge, Edge, Edge, Edge];
}
/**
 * What a reorganize did: the tree after it and the edges it changed.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Reorganized".
 */
export interface Reorganized {
  doc_structure: DocStructure;
  linked: Edge[];
  unlinked: Edge[];
}
/**
 * A partial update of RequirementFields: only the fields sent change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RequirementPatch".
 */
export interface RequirementPatch {
  description?: Description;
  /**
   * The version last seen (as `If-Match`); if both are sent they must agree.
   */
  expected_version?: number | null;
  name?: Name;
  priority?: null | (null | Priority);
  state?: null | RequirementState;
}
/**
 * A partial update of RiskFields: only the fields sent change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "RiskPatch".
 */
export interface RiskPatch {
  description?: Description;
  /**
   * The version last seen (as `If-Match`); if both are sent they must agree.
   */
  expected_version?: number | null;
  impact?: null | (null | Impact);
  state?: null | RiskState;
  title?: Name;
}
/**
 * A search result: enough to show it and to read it next.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SearchHit".
 */
export interface SearchHit {
  description?: Description;
  id: string;
  kind: RecordKind;
  matched_in: MatchedIn;
  name: string;
  project_id: ProjectId;
  updated_at: number;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SearchResults".
 */
export interface SearchResults {
  hits: SearchHit[];
  /**
   * True when more matched than `limit`.
   */
  truncated: boolean;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SessionList".
 */
export interface SessionList {
  /**
   * Pass as `cursor` for the next page; absent on the last page.
   */
  next_cursor?: string | null;
  sessions: SessionView[];
}
/**
 * The session as the client sees it (the `session` event, the sessions API).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SessionView".
 */
export interface SessionView {
  context_type: ContextType;
  created_at: number;
  entity_id?: string | null;
  /**
   * Free-form focus metadata from the client (`projectFocus`).
   */
  focus?: {
    [k: string]: unknown;
  };
  id: SessionId;
  last_activity_at: number;
  message_count: number;
  status: SessionStatus;
  title?: string | null;
}
/**
 * What a step made or changed, by id.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "StepOutputs".
 */
export interface StepOutputs {
  /**
   * The documents among them.
   */
  doc_ids?: string[];
  /**
   * Every entity created or changed (documents included).
   */
  entity_ids?: string[];
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "StopAnswer".
 */
export interface StopAnswer {
  message: string;
  /**
   * False when there was no running turn (it had ended, or another run was named): nothing changed.
   */
  stopped: boolean;
  turn_id?: string | null;
}
/**
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "StopRequest".
 */
export interface StopRequest {
  /**
   * Stop only this run (string or number); without it, whatever turn is running.
   */
  stream_run_id?: {
    [k: string]: unknown;
  };
}
/**
 * One tool call as the OpenAI protocol spells it.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "ToolCall".
 */
export interface ToolCall {
  function: FunctionCall;
  id: string;
  type?: string;
}
/**
 * Token usage as reported by the model (or estimated when it reports none).
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "Usage".
 */
export interface Usage {
  completion_tokens: number;
  prompt_tokens: number;
  total_tokens: number;
}
/**
 * Dev only (`DEV_EVENTS=1`): what the context builder kept and dropped.
 */
export interface DebugContext1 {
  chars_used: number;
  /**
   * Left out for the budgets or the tool-call protocol.
   */
  dropped: number[];
  /**
   * Log messages sent, in order, the current one last.
   */
  kept: number[];
  /**
   * The context pack's scope (`global`, `project`, `entity`); absent without a pack.
   */
  pack_scope?: string | null;
  /**
   * Not sent because the summary covers them.
   */
  summarized: number[];
  summary_used: boolean;
  tokens: DebugTokens;
  /**
   * False when the system prompt, summary and current message alone are over a budget.
   */
  within_budget: boolean;
}
/**
 * The body of `POST /sessions/{id}/suggestion`. Unknown fields are ignored;
 * an absent, `null` or blank field is none.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "SuggestionRequest".
 */
export interface SuggestionRequest {
  /**
   * What the user wants their next message to achieve; at most 1,000 characters.
   */
  goal?: string | null;
  /**
   * The other agent's last message, when the user's agent answers another
   * agent (an agent bridge): the draft answers it; at most 8,000 characters.
   */
  other_message?: string | null;
}
/**
 * A partial update of TaskFields: only the fields sent change.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "TaskPatch".
 */
export interface TaskPatch {
  description?: Description;
  /**
   * Milliseconds since the Unix epoch.
   */
  due_at?: number | null;
  /**
   * The version last seen (as `If-Match`); if both are sent they must agree.
   */
  expected_version?: number | null;
  /**
   * 1 (highest) to 5.
   */
  priority?: number | null;
  state?: null | TaskState;
  title?: Name;
}
/**
 * The body of `POST` to the stream function. Unknown fields are ignored so
 * older and newer clients keep working; the body must be a JSON object.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "TurnRequest".
 */
export interface TurnRequest {
  context_type?: string | null;
  entity_id?: string | null;
  message: string;
  projectFocus?: unknown;
  session_id?: string | null;
  /**
   * A string or a number; either way the idempotency key of this turn.
   */
  stream_run_id?: {
    [k: string]: unknown;
  };
  /**
   * The client's IANA time zone (`Europe/Berlin`): this turn's calendar
   * reads and writes local times in it. It is this turn's alone, never
   * stored; without it the turn uses the user's chosen zone
   * (`PUT /me/settings`), else UTC.
   */
  timezone?: string | null;
  /**
   * Groups the voice notes a message was dictated from; stored with the
   * user message and returned in its history.
   */
  voice_note_group_id?: string | null;
}
/**
 * The user's settings (`GET`/`PUT /me/settings` on the stream function):
 * `timezone`, the IANA zone the user chose, which turns without a zone of
 * their own use (the calendar tools, the agenda block, the daily brief).
 * Only this route sets it; a turn's `timezone` is that turn's alone.
 * `null` (or absent): none chosen, such turns use UTC. Wire format:
 * `docs/calendar.md#the-users-zone`.
 *
 * This interface was referenced by `WireTypes`'s JSON-Schema
 * via the `definition` "UserSettings".
 */
export interface UserSettings {
  /**
   * An IANA zone name (`America/New_York`); `null`: none chosen.
   */
  timezone?: string | null;
}
