//! The dashboard (docs/ARCHITECTURE.md §"Layers", §"Owner and clients"): run trays, live
//! lines, the detail pane, permission prompts, the dispatch form and budget gauges, on
//! ratatui + crossterm.
//!
//! It is one client of the dispatcher API, like the headless CLI: it sends [`Request`]s
//! and listens to [`DispatchEvent`]s, and knows nothing a headless client could not.
//!
//! Shape (one event enum and one loop; redraw on demand; render from a view model; views
//! on a stack; keys as data; an ANSI palette):
//! - [`event`]: the one [`AppEvent`] enum and the [`Effect`]s the app asks for;
//! - [`app`]: the state machine — `App::handle(event) -> effects`, no awaiting;
//! - [`model`]: the plain view model that [`render`] draws from;
//! - [`views`]: the [`views::View`] trait and the stack of prompts, cards, forms and boxes
//!   over the dashboard, each handling its own keys and drawing itself;
//! - [`keys`]: bindings as data, used for handling keys, footer hints and help;
//! - [`theme`]: the ANSI-only palette; [`layout`]: the rectangles; [`format`]: words;
//!   [`canvas`]: the drawing primitives the panes and the views share;
//! - [`frame`]: redraw on demand; [`runner`]: the one `select!` loop on the terminal, each
//!   frame drawn whole, and the [`RequestRunner`] that sends the app's requests;
//! - [`link`]: the connection to the owner (control socket requests, the event pump);
//! - [`shown`]: what each frame showed of the pending requests, and since when (the
//!   answer guard: a key answers only a request on screen, unchanged, long enough).
//!
//! What must stay true: nothing in this crate prints to stdout or stderr (the dashboard
//! owns the screen; logs go to the file), and drawing never does I/O.
//!
//! [`Request`]: drover_core::dispatch::Request
//! [`DispatchEvent`]: drover_core::dispatch::DispatchEvent
//! [`AppEvent`]: event::AppEvent
//! [`Effect`]: event::Effect

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod app;
#[cfg(test)]
mod app_tests;
pub mod canvas;
pub mod event;
pub mod format;
pub mod frame;
pub mod keys;
pub mod layout;
pub mod link;
pub mod model;
pub mod render;
pub mod runner;
pub mod shown;
pub mod terminal;
pub mod theme;
pub mod transcript;
pub mod views;

pub use app::{App, AppOptions};
pub use event::{AppEvent, AppEventSender, Effect, ReplyTag};
pub use link::Link;
pub use model::ViewModel;
pub use runner::{RequestRunner, run_on_terminal};
