//! The dashboard's palette: every colour and text modifier it uses, and nothing else.
//!
//! What must stay true: only the terminal's own ANSI colours (the sixteen the user's theme
//! defines) and the default foreground/background are used — never RGB or indexed colours —
//! so the dashboard reads on light and dark terminals alike. Plain text keeps the default
//! foreground; secondary text is dimmed rather than painted grey; emphasis is bold or
//! reversed. Other modules take their styles from here.

use ratatui::style::{Color, Modifier, Style};

/// Plain text: the terminal's default colours.
pub fn text() -> Style {
    Style::new()
}

/// Secondary text (labels, ages, hints' descriptions).
pub fn dim() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

/// Section titles and the run's title.
pub fn title() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

/// The product name in the header.
pub fn brand() -> Style {
    Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD)
}

/// The selected row.
pub fn selected() -> Style {
    Style::new().add_modifier(Modifier::REVERSED)
}

/// A key in a hint (`n`, `?`).
pub fn key() -> Style {
    Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD)
}

/// Things that want the user: pending prompts, needs input, the warning level.
pub fn attention() -> Style {
    Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)
}

pub fn warning() -> Style {
    Style::new().fg(Color::Yellow)
}

pub fn error() -> Style {
    Style::new().fg(Color::Red)
}

pub fn error_bold() -> Style {
    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
}

pub fn success() -> Style {
    Style::new().fg(Color::Green)
}

/// Running work (the running glyph, live lines of working runs).
pub fn active() -> Style {
    Style::new().fg(Color::Blue)
}

/// The focused field of a form, the highlighted choice of a question.
pub fn focus() -> Style {
    Style::new().fg(Color::Cyan)
}

/// Borders of overlays (prompts, forms, help).
pub fn overlay_border() -> Style {
    Style::new().fg(Color::Cyan)
}

/// Borders of the panes.
pub fn pane_border() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

/// The spent part of a gauge, by budget level.
pub fn gauge_spent(level: BudgetLevel) -> Style {
    match level {
        BudgetLevel::Normal => Style::new().fg(Color::Green),
        BudgetLevel::Warning => Style::new().fg(Color::Yellow),
        BudgetLevel::Cap => Style::new().fg(Color::Red),
    }
}

/// The reserved part of a gauge (what live runs may still spend).
pub fn gauge_reserved() -> Style {
    Style::new().fg(Color::Blue).add_modifier(Modifier::DIM)
}

/// Where a budget stands against its warning and hard cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetLevel {
    Normal,
    Warning,
    Cap,
}

impl BudgetLevel {
    /// The level of `spent` against a warning and a cap (a cap of zero is reached at once).
    pub fn of(spent: f64, warning: f64, cap: f64) -> BudgetLevel {
        if spent >= cap {
            BudgetLevel::Cap
        } else if spent >= warning {
            BudgetLevel::Warning
        } else {
            BudgetLevel::Normal
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_levels_turn_at_the_warning_and_at_the_cap() {
        assert_eq!(BudgetLevel::of(1.0, 8.0, 25.0), BudgetLevel::Normal);
        assert_eq!(BudgetLevel::of(8.0, 8.0, 25.0), BudgetLevel::Warning);
        assert_eq!(BudgetLevel::of(24.99, 8.0, 25.0), BudgetLevel::Warning);
        assert_eq!(BudgetLevel::of(25.0, 8.0, 25.0), BudgetLevel::Cap);
    }

    #[test]
    fn the_palette_uses_only_ansi_colours() {
        let styles = [
            text(),
            dim(),
            title(),
            brand(),
            selected(),
            key(),
            attention(),
            warning(),
            error(),
            error_bold(),
            success(),
            active(),
            focus(),
            overlay_border(),
            pane_border(),
            gauge_spent(BudgetLevel::Normal),
            gauge_spent(BudgetLevel::Warning),
            gauge_spent(BudgetLevel::Cap),
            gauge_reserved(),
        ];
        for style in styles {
            for colour in [style.fg, style.bg].into_iter().flatten() {
                assert!(
                    !matches!(colour, Color::Rgb(..) | Color::Indexed(_)),
                    "{colour:?} is not one of the terminal's ANSI colours"
                );
            }
        }
    }
}
