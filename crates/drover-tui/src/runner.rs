//! The dashboard's loop on its terminal: the only place in the dashboard that awaits,
//! reads the clock, owns the terminal and talks to the owner (through its [`Link`]: the
//! control socket, as a headless client does; [`RequestRunner`] sends the app's
//! requests).
//!
//! One `tokio::select!` loop takes app events (keys, mouse and resizes from the input
//! thread; answers from request tasks; dispatcher events and the owner going and coming
//! back from the link's event pump; stop signals), frame requests and a slow refresh
//! tick; it hands each to [`App::handle`] and carries out the [`Effect`]s.
//!
//! What must stay true: the clock (`model.now`) is set before each event is handled and
//! before each frame is drawn, so a key is judged at the time it arrived (the answer
//! guard, [`crate::shown`]); drawing happens only when a frame was requested, and a burst of
//! changes is one frame showing its last state (the frame requests merge, and the events
//! already waiting when a frame is due go in before it is drawn); countdowns ask for the
//! next second; the first frame waits for the first list of runs ([`FIRST_FRAME_WAIT`] at
//! most), so it shows them. Each frame reaches the terminal whole, inside its synchronized update
//! (`CSI ? 2026 h` … `CSI ? 2026 l`). A request to the dispatcher never blocks the loop
//! (each runs in its own task and answers with an `AppEvent::Reply`).

use crossterm::event::{self as term, Event};
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use crossterm::{execute, queue};
use ratatui::Terminal;
use ratatui::backend::{Backend, CrosstermBackend};
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

use super::app::{App, AppOptions};
use super::event::{AppEvent, AppEventSender, Effect};
use super::frame::FrameRequester;
use super::link::Link;
use super::model::ViewModel;
use super::render;
use drover_core::UnixMillis;
use drover_core::clock::now_millis;
use drover_core::error::{DroverError, ErrorCode};
use drover_core::text::{clip, one_line};

/// How often runs and money are fetched again even when no event said so.
const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// How long the input thread waits for a key before checking whether to stop.
const INPUT_POLL: Duration = Duration::from_millis(100);
/// How often the loop checks that its terminal is still there (a closed terminal emulator
/// or a killed tmux pane does not always send SIGHUP).
const TERMINAL_CHECK_EVERY: Duration = Duration::from_secs(2);
/// At most this many waiting events go into a frame that is due, so a flood of events
/// cannot hold frames back.
const EVENTS_PER_FRAME_MAX: usize = 1024;
/// How long the first frame waits for the first list of runs: drawn before it, the frame
/// would show an empty dashboard and hold the runs back by a frame gap
/// ([`crate::frame::MIN_FRAME_GAP`]); an owner slower than this gets the empty frame
/// first, as a sign of life.
const FIRST_FRAME_WAIT: Duration = Duration::from_millis(150);

/// Sends the app's requests to the owner, each in its own task; the answer comes back
/// as an `AppEvent::Reply`.
#[derive(Clone)]
pub struct RequestRunner {
    link: Link,
    events: AppEventSender,
}

impl RequestRunner {
    pub fn new(link: Link, events: AppEventSender) -> Self {
        RequestRunner { link, events }
    }

    /// Starts a request in its own task (its answer comes back as an app event); returns
    /// the effects that belong to the terminal's owner (notifications, quitting).
    pub fn execute(&self, effect: Effect) -> Option<Effect> {
        match effect {
            Effect::Request { tag, request } => {
                let link = self.link.clone();
                let events = self.events.clone();
                tokio::spawn(async move {
                    let result = link.request(request).await;
                    events.send(AppEvent::Reply { tag, result });
                });
                None
            }
            other => Some(other),
        }
    }
}

/// Runs the dashboard on this terminal until the user leaves, a stop signal arrives or an
/// owner in this process ends (`dispatcher_ended` completes; pending for a background
/// owner). Takes the terminal (raw mode, the alternate screen, mouse capture) and gives it
/// back before returning. The runs are the owner's business, not the dashboard's.
pub async fn run_on_terminal(
    link: Link,
    dispatcher_ended: impl Future<Output = DroverError>,
    options: AppOptions,
) -> Result<(), DroverError> {
    let guard = crate::terminal::TerminalGuard::enter().map_err(|e| {
        DroverError::new(
            ErrorCode::Internal,
            format!(
                "the dashboard needs a terminal ({e}); run it in one, or use the headless \
                 commands (`drover serve`, `drover runs`, `drover dispatch`)"
            ),
        )
    })?;
    let backend = CrosstermBackend::new(std::io::stdout());
    let mut terminal = Terminal::new(backend).map_err(terminal_error)?;
    // The backend's clear, not `Terminal::clear`: that one asks the terminal where its
    // cursor is first and waits for the answer, a round trip before the first frame for a
    // cursor the alternate screen does not keep.
    terminal.backend_mut().clear().map_err(terminal_error)?;
    let outcome = event_loop(&mut terminal, link, dispatcher_ended, options).await;
    // ratatui's `Terminal` prints to stderr from its destructor when it cannot show the
    // cursor, and printing to a terminal that is gone panics, which would skip stopping
    // the runs. Show the cursor here; if even that fails, the terminal is gone and the
    // `Terminal` is forgotten instead of dropped.
    if terminal.show_cursor().is_ok() {
        drop(terminal);
    } else {
        std::mem::forget(terminal);
    }
    drop(guard);
    outcome
}

fn terminal_error(e: impl std::fmt::Display) -> DroverError {
    DroverError::new(
        ErrorCode::Internal,
        format!("cannot draw on the terminal: {e}"),
    )
}

async fn event_loop<B: Backend + Write>(
    terminal: &mut Terminal<B>,
    link: Link,
    dispatcher_ended: impl Future<Output = DroverError>,
    options: AppOptions,
) -> Result<(), DroverError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sender = AppEventSender::new(tx);
    // Whether the terminal is focused, told to the owner on the event stream's connection
    // (no desktop notification of the owner's while it is: docs/ARCHITECTURE.md
    // §"Notifications"). Until the terminal says otherwise, a dashboard just opened is.
    let (focus, focused) = tokio::sync::watch::channel(true);
    let pump = AbortOnDrop(link.spawn_events(sender.clone(), focused));
    let requests = RequestRunner::new(link, sender.clone());
    let (frames, mut draws) = FrameRequester::spawn();
    let stop_input = Arc::new(AtomicBool::new(false));
    let lent = Lent::default();
    let input = spawn_input_thread(sender.clone(), stop_input.clone(), lent.clone(), focus);
    spawn_signal_listener(sender.clone(), lent.clone());

    let size = terminal.size().map_err(terminal_error)?;
    let mut title = String::new();
    let mut app = App::new(
        options,
        ViewModel::new(now_millis(), size.width, size.height),
    );
    let mut refresh = tokio::time::interval(REFRESH_EVERY);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    refresh.tick().await;
    let mut terminal_check = tokio::time::interval(TERMINAL_CHECK_EVERY);
    terminal_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(dispatcher_ended);

    let mut effects = app.start();
    frames.schedule_frame_in(FIRST_FRAME_WAIT);
    let mut effects_after: Vec<Effect> = Vec::new();
    let outcome = loop {
        effects.append(&mut effects_after);
        for effect in effects.drain(..) {
            match requests.execute(effect) {
                Some(Effect::Notify(text)) => {
                    notify(terminal.backend_mut(), &text);
                }
                Some(Effect::OpenIn(open)) => {
                    let outcome = open_in(terminal, &lent, open).await;
                    app.model.now = now_millis();
                    effects_after.extend(app.handle(AppEvent::Opened(outcome)));
                    frames.schedule_frame();
                }
                Some(Effect::Copy(text)) => {
                    let out = terminal.backend_mut();
                    let _ = out.write_all(crate::terminal::osc52(&text).as_bytes());
                    let _ = Write::flush(out);
                }
                Some(Effect::Quit) | Some(Effect::Request { .. }) | None => {}
            }
        }
        if app.quitting() {
            break Ok(());
        }
        tokio::select! {
            Some(event) = rx.recv() => {
                // Each event is handled at its own time (a key answers only a request
                // on screen long enough: the answer guard reads the clock set here).
                app.model.now = now_millis();
                effects = app.handle(event);
            }
            Some(()) = draws.recv() => {
                effects = frame_due(terminal, &mut app, &mut rx, &mut title, now_millis())?;
                if app.has_countdowns() {
                    let to_next_second = 1_000 - app.model.now.rem_euclid(1_000) + 5;
                    frames.schedule_frame_in(Duration::from_millis(to_next_second as u64));
                }
                // A frame changes nothing: no new frame is asked for.
                continue;
            }
            _ = refresh.tick() => {
                app.model.now = now_millis();
                effects = app.handle(AppEvent::Tick);
            }
            _ = terminal_check.tick() => {
                if std::io::stdin().is_terminal() {
                    continue;
                }
                tracing::warn!("the terminal is gone; stopping the dashboard");
                app.model.now = now_millis();
                effects = app.handle(AppEvent::Terminate);
            }
            e = &mut dispatcher_ended => break Err(e),
        }
        // Something was handled: one frame (merged with any others asked for meanwhile),
        // once the first list of runs is here to be drawn.
        if !app.first_runs_pending() {
            frames.schedule_frame();
        }
    };
    // The input thread ends at its next poll. It is not waited for: when the terminal has
    // gone away, crossterm's poll can spin without returning (crossterm-rs/crossterm#793),
    // and the process must still shut its runs down and exit.
    stop_input.store(true, Ordering::SeqCst);
    drop(input);
    drop(pump);
    outcome
}

/// A frame is due. The events already waiting go in first (at most
/// [`EVENTS_PER_FRAME_MAX`]), so a burst of changes is drawn once, in its last state;
/// then the frame is drawn at `now` ([`draw_frame`]), unless one of them ended the
/// dashboard. Returns the effects of the events handled here.
fn frame_due<B: Backend + Write>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    waiting: &mut mpsc::UnboundedReceiver<AppEvent>,
    title: &mut String,
    now: UnixMillis,
) -> Result<Vec<Effect>, DroverError> {
    let mut effects = Vec::new();
    app.model.now = now;
    for _ in 0..EVENTS_PER_FRAME_MAX {
        if app.quitting() {
            return Ok(effects);
        }
        let Ok(event) = waiting.try_recv() else {
            break;
        };
        effects.extend(app.handle(event));
    }
    if app.quitting() {
        return Ok(effects);
    }
    draw_frame(terminal, app, title)?;
    Ok(effects)
}

/// Draws one frame of `app`, whole: everything written for it (the cells that changed,
/// the cursor, the window title when it changed) goes between the terminal's
/// synchronized-update begin and end, so a slow terminal shows the frame before or
/// the frame after, never half of one.
fn draw_frame<B: Backend + Write>(
    terminal: &mut Terminal<B>,
    app: &App,
    title: &mut String,
) -> Result<(), DroverError> {
    queue!(terminal.backend_mut(), BeginSynchronizedUpdate).map_err(terminal_error)?;
    let drawn = terminal
        .draw(|frame| render::draw(frame, app))
        .map(drop)
        .map_err(terminal_error);
    let now_title = app.title();
    if drawn.is_ok() && now_title != *title {
        let out = terminal.backend_mut();
        let _ = out.write_all(crate::terminal::title_sequence(&now_title).as_bytes());
        *title = now_title;
    }
    // Ended even when drawing failed, so the terminal does not hold back what follows.
    let ended = execute!(terminal.backend_mut(), EndSynchronizedUpdate).map_err(terminal_error);
    drawn.and(ended)
}

/// Aborts the task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Rings the bell and posts an OSC 9 desktop notification (terminals that do not know
/// OSC 9 ignore it).
fn notify(out: &mut impl Write, text: &str) {
    let text = clip(&one_line(text), 120);
    let _ = write!(out, "\x07\x1b]9;drover: {text}\x07");
    let _ = out.flush();
}

/// Reads terminal input on its own thread (crossterm's reads block) until `stop`.
/// Whether the terminal is lent to a program in the foreground (`o`, `!` outside tmux):
/// the input thread then reads nothing (it says it has stopped reading in `parked`), and
/// Ctrl-C is the program's, not the dashboard's.
#[derive(Clone, Default)]
struct Lent {
    lent: Arc<AtomicBool>,
    parked: Arc<AtomicBool>,
}

/// How long the input thread sleeps between looks while the terminal is lent.
const LENT_POLL: Duration = Duration::from_millis(20);

/// Runs `open` (a program of the user's in a run's directory). Inside tmux it is started
/// beside the dashboard and left running; outside, the terminal is lent to it — the input
/// thread stops reading, the screen is left — until it exits, then taken back and redrawn
/// whole. Returns what to say of it.
async fn open_in<B: Backend + Write>(
    terminal: &mut Terminal<B>,
    lent: &Lent,
    open: crate::event::OpenIn,
) -> Result<String, String> {
    let Some((program, args)) = open.argv.split_first() else {
        return Err("nothing to run".into());
    };
    let mut command = std::process::Command::new(program);
    command.args(args).current_dir(&open.dir);
    if !open.foreground {
        return match command.stdin(std::process::Stdio::null()).output() {
            Ok(out) if out.status.success() => Ok(format!(
                "{} opened in a tmux window in {}",
                open.program.word(),
                open.dir.display()
            )),
            Ok(out) => Err(format!(
                "tmux could not open the {}: {}",
                open.program.word(),
                one_line(&String::from_utf8_lossy(&out.stderr))
            )),
            Err(e) => Err(format!("cannot run tmux: {e}")),
        };
    }
    lent.lent.store(true, Ordering::SeqCst);
    // The input thread must not read the program's keys: wait (bounded) until it parks.
    for _ in 0..50 {
        if lent.parked.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(LENT_POLL).await;
    }
    crate::terminal::suspend();
    let status = tokio::task::spawn_blocking(move || command.status()).await;
    let back = crate::terminal::resume();
    let _ = terminal.clear();
    lent.lent.store(false, Ordering::SeqCst);
    if let Err(e) = back {
        tracing::warn!(error = %e, "cannot take the terminal back");
    }
    let what = open.program.word();
    match status {
        Ok(Ok(s)) if s.success() => Ok(format!("back from the {what} in {}", open.dir.display())),
        Ok(Ok(s)) => Err(format!("the {what} ({program}) ended with {s}")),
        Ok(Err(e)) => Err(format!(
            "cannot start the {what} `{program}`: {e}; set $VISUAL, $EDITOR or $SHELL to one that is installed"
        )),
        Err(e) => Err(format!("the {what} could not be waited for: {e}")),
    }
}

fn spawn_input_thread(
    sender: AppEventSender,
    stop: Arc<AtomicBool>,
    lent: Lent,
    focus: tokio::sync::watch::Sender<bool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            if lent.lent.load(Ordering::SeqCst) {
                lent.parked.store(true, Ordering::SeqCst);
                std::thread::sleep(LENT_POLL);
                continue;
            }
            lent.parked.store(false, Ordering::SeqCst);
            match term::poll(INPUT_POLL) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(_) => {
                    sender.send(AppEvent::Terminate);
                    return;
                }
            }
            match term::read() {
                Ok(Event::Key(key)) => sender.send(AppEvent::Key(key)),
                Ok(Event::Mouse(mouse)) => sender.send(AppEvent::Mouse(mouse)),
                Ok(Event::Resize(width, height)) => sender.send(AppEvent::Resize { width, height }),
                Ok(Event::FocusGained) => {
                    focus.send_replace(true);
                }
                Ok(Event::FocusLost) => {
                    focus.send_replace(false);
                }
                Ok(_) => {}
                Err(_) => {
                    sender.send(AppEvent::Terminate);
                    return;
                }
            }
        }
    })
}

/// SIGTERM, SIGHUP and SIGINT end the dashboard (runs are stopped on the way out).
/// (While the terminal is lent to a program, Ctrl-C is that program's.)
fn spawn_signal_listener(sender: AppEventSender, lent: Lent) {
    use tokio::signal::unix::{SignalKind, signal};
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut hup), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!("cannot listen for stop signals; quit with q");
            return;
        };
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = hup.recv() => break,
                _ = int.recv() => {
                    if !lent.lent.load(Ordering::SeqCst) {
                        break;
                    }
                }
            }
        }
        sender.send(AppEvent::Terminate);
    });
}

/// The receiving end of app events, for tests and other loops without a terminal.
pub fn channel() -> (AppEventSender, mpsc::UnboundedReceiver<AppEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (AppEventSender::new(tx), rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameRequester;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::layout::Rect;
    use ratatui::{TerminalOptions, Viewport};

    const BEGIN: &[u8] = b"\x1b[?2026h";
    const END: &[u8] = b"\x1b[?2026l";

    /// What a terminal in memory was sent.
    #[derive(Clone, Default)]
    struct Screen(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        /// What the terminal was sent since the last call.
        fn written(&self) -> Vec<u8> {
            std::mem::take(&mut *self.0.borrow_mut())
        }
    }

    /// A terminal that writes into `screen`.
    fn memory_terminal(screen: &Screen) -> Terminal<CrosstermBackend<Screen>> {
        Terminal::with_options(
            CrosstermBackend::new(screen.clone()),
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, 0, 100, 30)),
            },
        )
        .expect("a terminal in memory")
    }

    fn count(bytes: &[u8], needle: &[u8]) -> usize {
        bytes.windows(needle.len()).filter(|w| *w == needle).count()
    }

    fn contains(bytes: &[u8], needle: &str) -> bool {
        count(bytes, needle.as_bytes()) > 0
    }

    fn key(c: char) -> AppEvent {
        AppEvent::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
    }

    fn app() -> App {
        App::new(AppOptions::new("/".into()), ViewModel::new(0, 100, 30))
    }

    #[test]
    fn each_frame_reaches_the_terminal_inside_a_synchronized_update() {
        let mut app = app();
        let screen = Screen::default();
        let mut terminal = memory_terminal(&screen);
        let mut title = String::new();
        draw_frame(&mut terminal, &app, &mut title).expect("drawn");
        let first = screen.written();
        assert!(
            first.starts_with(BEGIN),
            "{:?}",
            String::from_utf8_lossy(&first)
        );
        assert!(
            first.ends_with(END),
            "{:?}",
            String::from_utf8_lossy(&first)
        );
        assert_eq!((count(&first, BEGIN), count(&first, END)), (1, 1));
        assert!(
            contains(&first, "drover"),
            "the frame and its title are inside"
        );
        // A later frame (only the cells that changed: help opened) is wrapped the same.
        let _ = app.handle(key('?'));
        draw_frame(&mut terminal, &app, &mut title).expect("drawn");
        let second = screen.written();
        assert!(second.starts_with(BEGIN) && second.ends_with(END));
        assert_eq!((count(&second, BEGIN), count(&second, END)), (1, 1));
        assert!(contains(&second, "Keys"), "the help view was drawn");
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_changes_is_drawn_once_in_its_last_state() {
        let (frames, mut draws) = FrameRequester::spawn();
        let (sender, mut waiting) = channel();
        let mut app = app();
        let screen = Screen::default();
        let mut terminal = memory_terminal(&screen);
        let mut title = String::new();
        frames.schedule_frame();
        draws.recv().await.expect("the first frame");
        let effects = frame_due(&mut terminal, &mut app, &mut waiting, &mut title, 0);
        assert_eq!(effects.expect("drawn"), []);
        screen.written();

        // A burst: the filter box opened and "abc" typed, a frame asked for after each.
        for c in ['/', 'a', 'b', 'c'] {
            sender.send(key(c));
            frames.schedule_frame();
        }
        // The loop takes the first event; then the frame is due with the others waiting.
        let first = waiting.recv().await.expect("an event");
        let _ = app.handle(first);
        draws.recv().await.expect("a frame");
        frame_due(&mut terminal, &mut app, &mut waiting, &mut title, 0).expect("drawn");
        let out = screen.written();
        assert_eq!(count(&out, BEGIN), 1, "one frame for the burst");
        assert!(contains(&out, "abc"), "the frame shows the last state");
        assert!(
            waiting.try_recv().is_err(),
            "every event went into the frame"
        );
        // Nothing is left to draw: the requests merged into that one frame.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(draws.try_recv().is_err(), "no second frame");
    }

    #[test]
    fn no_frame_is_drawn_once_a_waiting_event_ends_the_dashboard() {
        let (sender, mut waiting) = channel();
        let mut app = app();
        let screen = Screen::default();
        let mut terminal = memory_terminal(&screen);
        sender.send(AppEvent::Terminate);
        let effects = frame_due(&mut terminal, &mut app, &mut waiting, &mut String::new(), 0);
        assert_eq!(effects.expect("no error"), [Effect::Quit]);
        assert!(app.quitting());
        assert_eq!(screen.written(), b"", "nothing drawn");
    }
}
