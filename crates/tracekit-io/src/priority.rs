//! Threads that make answers nobody is watching being made: a viewer's
//! workers and the tables it builds beside them. They run at a lower
//! scheduling priority, so that the thread that reads requests and writes
//! answers, and the browser that shows them, are run first when the cores
//! are all busy: a page stays answered while slow queries run.

/// How much lower than the default: the scheduler gives a thread at nice 10
/// about a tenth of the time of one at nice 0 when both want a core.
const NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`NICE`] (Linux, where
/// the nice value is a thread's). A failure is ignored: the thread runs as
/// before. Other systems keep the priority, which there is the process's.
pub fn batch() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority only read their arguments; the id is
        // the calling thread's own, and raising its own nice value needs no
        // privilege.
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, NICE);
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn a_batch_thread_runs_at_a_lower_priority_and_others_do_not() {
        // SAFETY: getpriority reads the calling thread's nice value.
        let nice =
            || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let before = nice();
        let batch = std::thread::spawn(move || {
            super::batch();
            nice()
        })
        .join()
        .unwrap_or(before);
        assert_eq!(batch, (before + super::NICE).min(19));
        assert_eq!(nice(), before, "the calling thread's own priority is kept");
    }
}
