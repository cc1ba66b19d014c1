//! The calendar (issue 27). Placeholder on the CalDAV branch: the lead's
//! module replaces this file and declares `pub mod caldav;`.

pub mod caldav;
