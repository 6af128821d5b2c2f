"""Per-instance traces in the harness's own event types (never a framework's dumps)."""

from harness.traces.events import (
    Divergence,
    EnvAction,
    ErrorEvent,
    Event,
    JudgeCall,
    LimitEvent,
    Message,
    ModelAttempt,
    ModelCall,
    ModelCallStarted,
    ModelWait,
    Stderr,
    SystemPrompt,
    TaskEvent,
    ToolCall,
    ToolCallsDropped,
    ToolResult,
    ToolsOffered,
    Tracer,
    UserReply,
    VerdictEvent,
    append_event,
    read_events,
    read_trace,
)

__all__ = ["Divergence", "EnvAction", "ErrorEvent", "Event", "JudgeCall", "LimitEvent", "Message", "ModelAttempt",
           "ModelCall", "ModelCallStarted", "ModelWait", "Stderr", "SystemPrompt", "TaskEvent", "ToolCall",
           "ToolCallsDropped", "ToolResult", "ToolsOffered", "Tracer", "UserReply", "VerdictEvent", "append_event",
           "read_events", "read_trace"]
