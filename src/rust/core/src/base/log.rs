//! Where the engine's messages go (ggml's log callback) and who hears of
//! internal failures (ggml's abort callback).
//!
//! The engine calls [`log`] from any thread; the message goes to the
//! installed [`LogSink`], or, with none, warnings and errors to the process's
//! standard error (debug and info messages are dropped). A sink must not
//! block and must not call into a host language from a worker thread; the R
//! binding's sink queues messages and prints them on R's main thread.
//!
//! The engine never aborts the process. Where ggml would abort (an internal
//! failure caught at the boundary), [`abort`] tells the installed
//! [`AbortHandler`], or prints the message to standard error when there is
//! none; the caller still gets its error value.

use std::sync::{Arc, RwLock};

/// Severity of a message, as ggml's log levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }

    pub fn from_name(name: &str) -> crate::Result<Level> {
        [Level::Debug, Level::Info, Level::Warn, Level::Error]
            .into_iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| anyhow::anyhow!("unknown log level '{name}': use debug, info, warn or error"))
    }
}

/// Receives the engine's messages.
pub trait LogSink: Send + Sync {
    fn log(&self, level: Level, msg: &str);
}

/// Hears of internal failures (where ggml would abort).
pub trait AbortHandler: Send + Sync {
    fn on_abort(&self, msg: &str);
}

static SINK: RwLock<Option<Arc<dyn LogSink>>> = RwLock::new(None);
static ABORT: RwLock<Option<Arc<dyn AbortHandler>>> = RwLock::new(None);

/// Install a sink (None: the default); returns the previous one.
pub fn set_sink(sink: Option<Arc<dyn LogSink>>) -> Option<Arc<dyn LogSink>> {
    std::mem::replace(&mut *SINK.write().unwrap_or_else(|e| e.into_inner()), sink)
}

/// Whether a sink is installed.
pub fn has_sink() -> bool {
    SINK.read().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// Send a message to the sink.
pub fn log(level: Level, msg: &str) {
    let sink = SINK.read().unwrap_or_else(|e| e.into_inner()).clone();
    match sink {
        Some(s) => s.log(level, msg),
        None if level >= Level::Warn => eprintln!("ggmlR {}: {msg}", level.name()),
        None => {}
    }
}

pub fn debug(msg: &str) {
    log(Level::Debug, msg)
}

pub fn warn(msg: &str) {
    log(Level::Warn, msg)
}

/// Install an abort handler (None: the default); returns the previous one.
pub fn set_abort_handler(h: Option<Arc<dyn AbortHandler>>) -> Option<Arc<dyn AbortHandler>> {
    std::mem::replace(&mut *ABORT.write().unwrap_or_else(|e| e.into_inner()), h)
}

pub fn has_abort_handler() -> bool {
    ABORT.read().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// Report an internal failure (the operation was abandoned, nothing aborts).
pub fn abort(msg: &str) {
    let h = ABORT.read().unwrap_or_else(|e| e.into_inner()).clone();
    match h {
        Some(h) => h.on_abort(msg),
        None => eprintln!("ggmlR: internal failure: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Keep(Mutex<Vec<(Level, String)>>);
    impl LogSink for Keep {
        fn log(&self, level: Level, msg: &str) {
            self.0.lock().unwrap().push((level, msg.to_string()));
        }
    }
    impl AbortHandler for Keep {
        fn on_abort(&self, msg: &str) {
            self.0.lock().unwrap().push((Level::Error, format!("abort: {msg}")));
        }
    }

    #[test]
    fn sinks_receive_messages_from_any_thread() {
        let k = Arc::new(Keep(Mutex::new(Vec::new())));
        let old = set_sink(Some(k.clone()));
        std::thread::spawn(|| warn("from a worker")).join().unwrap();
        debug("a detail");
        set_sink(old);
        let old_h = set_abort_handler(Some(k.clone()));
        assert!(has_abort_handler());
        abort("bad state");
        set_abort_handler(old_h);
        let got = k.0.lock().unwrap().clone();
        assert!(got.contains(&(Level::Warn, "from a worker".into())));
        assert!(got.contains(&(Level::Debug, "a detail".into())));
        assert!(got.contains(&(Level::Error, "abort: bad state".into())));
        assert_eq!(Level::from_name("warn").unwrap(), Level::Warn);
        assert!(Level::from_name("loud").is_err());
    }
}
