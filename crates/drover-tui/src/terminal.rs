//! The terminal's state while the dashboard owns it, and putting it back.
//!
//! What must stay true: whatever way drover leaves the dashboard (return, error, panic),
//! the user's shell gets its terminal back: no frame held in a synchronized update, raw
//! mode off, main screen, no mouse capture, cursor shown, and this happens before a
//! panic report is printed. Restoring only writes
//! escape sequences when a [`TerminalGuard`] is live, so a panic in a headless command
//! piped into another program does not put escape codes into its output.

use crossterm::event::{
    DisableFocusChange, DisableMouseCapture, EnableFocusChange, EnableMouseCapture,
};
use crossterm::terminal::{EndSynchronizedUpdate, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{cursor, execute, queue};
use drover_core::error::{DroverError, ErrorCode};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the terminal is in the dashboard's state (a [`TerminalGuard`] is live).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Installs color-eyre's report and panic hooks, then a panic hook that restores the
/// terminal and passes the panic on to them. Call once, at startup.
pub fn install_panic_and_error_hooks() -> Result<(), DroverError> {
    color_eyre::install().map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!("cannot install the error report hooks: {e}"),
        )
    })?;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        tracing::error!("panic: {info}");
        previous(info);
    }));
    Ok(())
}

/// Puts the terminal in the dashboard's state; dropping it restores the terminal.
#[must_use = "the terminal is restored when the guard drops"]
#[derive(Debug)]
pub struct TerminalGuard {
    _private: (),
}

impl TerminalGuard {
    /// Raw mode, the alternate screen, mouse capture and focus reports. If a step fails, what was done
    /// is undone before the error returns.
    pub fn enter() -> io::Result<TerminalGuard> {
        // Not a terminal (or raw mode refused): nothing was changed, nothing to undo.
        crossterm::terminal::enable_raw_mode()?;
        // Marked before the screen changes, so the panic hook undoes a half-entered state.
        ACTIVE.store(true, Ordering::SeqCst);
        match execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableFocusChange
        ) {
            Ok(()) => {
                // The terminal's title is saved on its stack, to be given back on leaving
                // (the dashboard sets its own: `drover · N need you`).
                let mut out = io::stdout();
                let _ = out.write_all(PUSH_TITLE.as_bytes());
                let _ = out.flush();
                Ok(TerminalGuard { _private: () })
            }
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Lends the terminal to a program in the foreground (`o`, `!` outside tmux): the
/// dashboard's state is left as on leaving; [`resume`] takes it back. The guard stays
/// live, so leaving the dashboard later still restores.
pub fn suspend() {
    restore();
}

/// Takes the terminal back after [`suspend`]: raw mode, the alternate screen and mouse
/// capture again (the caller then redraws the whole screen).
pub fn resume() -> io::Result<()> {
    crossterm::terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)
}

/// Whether a [`TerminalGuard`] currently holds the terminal.
pub fn is_active() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

/// Gives the terminal back to the shell, best-effort: each step is tried and its error
/// ignored. Does nothing unless a [`TerminalGuard`] entered, and only once per entry.
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = write_restore_sequence(&mut io::stdout());
}

/// The escape sequences that leave the dashboard's screen state: a frame cut short by a
/// panic let go of (its synchronized update ended), mouse capture off, main screen,
/// cursor shown. Each is written even if an earlier one failed.
fn write_restore_sequence(out: &mut impl Write) -> io::Result<()> {
    let frame = queue!(out, EndSynchronizedUpdate);
    let title = out.write_all(POP_TITLE.as_bytes());
    let mouse = queue!(out, DisableMouseCapture, DisableFocusChange);
    let screen = queue!(out, LeaveAlternateScreen);
    let cursor = queue!(out, cursor::Show);
    let flushed = out.flush();
    frame
        .and(title)
        .and(mouse)
        .and(screen)
        .and(cursor)
        .and(flushed)
}

/// Saves the window title on the terminal's title stack (xterm's `CSI 22 ; 0 t`;
/// terminals without one ignore it).
const PUSH_TITLE: &str = "\x1b[22;0t";
/// Gives back the saved title (`CSI 23 ; 0 t`).
const POP_TITLE: &str = "\x1b[23;0t";

/// The escape sequence that sets the window title (OSC 2).
pub fn title_sequence(title: &str) -> String {
    let title: String = title.chars().filter(|c| !c.is_control()).collect();
    format!("\x1b]2;{title}\x07")
}

/// The escape sequence that puts `text` on the system clipboard (OSC 52, `c`: the
/// clipboard selection), its bytes in standard base64 so nothing in it is read as an
/// escape. Terminals that do not know OSC 52 (or refuse it) ignore it; inside tmux it
/// reaches the outer terminal with tmux's `set-clipboard` on.
pub fn osc52(text: &str) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    format!("\x1b]52;c;{encoded}\x07")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_sequence_leaves_every_mode_the_dashboard_enters() {
        let mut out = Vec::new();
        write_restore_sequence(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        // mouse reporting modes off
        for mode in ["1000", "1002", "1003", "1006"] {
            assert!(text.contains(&format!("\u{1b}[?{mode}l")), "{text:?}");
        }
        assert!(text.contains("\u{1b}[?1049l"), "main screen: {text:?}");
        assert!(
            text.contains("\u{1b}[?1004l"),
            "focus reports off: {text:?}"
        );
        assert!(text.contains("\u{1b}[?25h"), "cursor shown: {text:?}");
        assert!(
            text.starts_with("\u{1b}[?2026l"),
            "a frame's synchronized update ended first: {text:?}"
        );
        assert!(
            text.contains("\u{1b}[23;0t"),
            "the title given back: {text:?}"
        );
        assert_eq!(
            title_sequence("drover · 2 need you\x07\x1b"),
            "\u{1b}]2;drover · 2 need you\u{7}"
        );
    }

    #[test]
    fn the_clipboard_sequence_carries_the_text_in_base64() {
        assert_eq!(osc52("a\nb\x1b"), "\u{1b}]52;c;YQpiGw==\u{7}");
        assert_eq!(osc52(""), "\u{1b}]52;c;\u{7}");
    }
}
