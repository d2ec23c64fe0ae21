//! Opening the viewer's page in the user's browser: `$BROWSER`, else `xdg-open`,
//! and saying so when none started. `xdg-open` itself starts even where it finds
//! no browser, and then exits with a failure, so its exit status is waited for
//! (on a thread of its own: it may stay until the browser exits).

use std::process::{Command, Stdio};

/// Starts the user's browser on `url`; `failed` is called with why, from another
/// thread when the browser program started but failed.
pub fn open(url: &str, failed: impl FnOnce(String) + Send + 'static) {
    let browser = std::env::var("BROWSER").unwrap_or_else(|_| "xdg-open".to_string());
    open_with(&browser, url, failed);
}

/// [`open`] with the program `browser`.
pub fn open_with(browser: &str, url: &str, failed: impl FnOnce(String) + Send + 'static) {
    let started = Command::new(browser)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match started {
        Ok(child) => child,
        Err(e) => return failed(format!("cannot start {browser}: {e}")),
    };
    let browser = browser.to_string();
    std::thread::spawn(move || match child.wait() {
        Ok(status) if !status.success() => {
            failed(format!(
                "no browser started ({browser} exited with {status})"
            ));
        }
        Ok(_) => {}
        Err(e) => failed(format!("waiting for {browser}: {e}")),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn why(browser: &str) -> Option<String> {
        let (tx, rx) = mpsc::channel();
        open_with(browser, "http://127.0.0.1:1/", move |why| {
            let _ = tx.send(why);
        });
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    #[test]
    fn a_browser_that_fails_or_is_missing_is_said() {
        let failed = why("false").unwrap_or_default();
        assert!(
            failed.starts_with("no browser started (false exited with "),
            "{failed}"
        );
        let missing = why("/nonexistent/browser").unwrap_or_default();
        assert!(
            missing.starts_with("cannot start /nonexistent/browser: "),
            "{missing}"
        );
        assert_eq!(why("true"), None);
    }
}
