//! iCalendar mapping (in progress).
