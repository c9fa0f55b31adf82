//! Fitting the spec's numbers into the configured ranges.
//!
//! Owns clamping. What must stay true: numbers are never refused; an absent number takes
//! its default silently; a number that is changed (out of range, not finite, or not whole
//! cents) is recorded as a [`Clamp`]; nothing here panics, even when a configured minimum
//! is above its maximum (the maximum wins).

use super::validated::Clamp;

/// `requested` fitted into `min..=max`, or `default` when absent.
pub fn whole_number(
    field: &str,
    requested: Option<i64>,
    (min, max, default): (u64, u64, u64),
    clamps: &mut Vec<Clamp>,
) -> u64 {
    let Some(requested) = requested else {
        return default;
    };
    let applied = i128::from(requested)
        .max(i128::from(min))
        .min(i128::from(max));
    // `applied` lies between two u64 values (or equals `max`), so it fits.
    let applied = u64::try_from(applied).unwrap_or(max);
    if i128::from(applied) != i128::from(requested) {
        clamps.push(Clamp {
            field: field.to_string(),
            requested: requested.to_string(),
            applied: applied.to_string(),
        });
    }
    applied
}

/// `requested` dollars fitted into `min..=max` and rounded to whole cents, or `default`
/// when absent. NaN and infinities take the default and are recorded.
pub fn dollars(
    field: &str,
    requested: Option<f64>,
    (min, max, default): (f64, f64, f64),
    clamps: &mut Vec<Clamp>,
) -> f64 {
    let Some(requested) = requested else {
        return whole_cents(default);
    };
    let applied = if requested.is_finite() {
        let cents = (requested * 100.0).round();
        let min_cents = (min * 100.0).round();
        let max_cents = (max * 100.0).round();
        cents.max(min_cents).min(max_cents) / 100.0
    } else {
        whole_cents(default)
    };
    if applied != requested {
        clamps.push(Clamp {
            field: field.to_string(),
            requested: requested.to_string(),
            applied: format!("{applied:.2}"),
        });
    }
    applied
}

fn whole_cents(dollars: f64) -> f64 {
    (dollars * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(requested, applied)` of the clamp a case expects, if any.
    type WantClamp = Option<(&'static str, &'static str)>;

    #[test]
    fn whole_numbers_are_clamped_and_recorded() {
        let range = (1, 240, 45);
        let cases: &[(Option<i64>, u64, WantClamp)] = &[
            (None, 45, None),
            (Some(1), 1, None),
            (Some(240), 240, None),
            (Some(90), 90, None),
            (Some(0), 1, Some(("0", "1"))),
            (Some(-7), 1, Some(("-7", "1"))),
            (Some(241), 240, Some(("241", "240"))),
            (Some(i64::MAX), 240, Some(("9223372036854775807", "240"))),
            (Some(i64::MIN), 1, Some(("-9223372036854775808", "1"))),
        ];
        for &(requested, want, clamp) in cases {
            let mut clamps = Vec::new();
            let got = whole_number("max_minutes", requested, range, &mut clamps);
            assert_eq!(got, want, "{requested:?}");
            let want_clamps: Vec<Clamp> = clamp
                .into_iter()
                .map(|(r, a)| Clamp {
                    field: "max_minutes".into(),
                    requested: r.into(),
                    applied: a.into(),
                })
                .collect();
            assert_eq!(clamps, want_clamps, "{requested:?}");
        }
    }

    #[test]
    fn an_inverted_range_does_not_panic_and_the_maximum_wins() {
        let mut clamps = Vec::new();
        assert_eq!(
            whole_number("max_turns", Some(5), (10, 3, 6), &mut clamps),
            3
        );
    }

    #[test]
    fn dollars_are_clamped_rounded_to_cents_and_recorded() {
        let range = (0.10, 25.0, 5.0);
        let cases: &[(Option<f64>, f64, WantClamp)] = &[
            (None, 5.0, None),
            (Some(5.0), 5.0, None),
            (Some(0.1), 0.1, None),
            (Some(25.0), 25.0, None),
            (Some(1.23), 1.23, None),
            (Some(1.234), 1.23, Some(("1.234", "1.23"))),
            (Some(1.235_1), 1.24, Some(("1.2351", "1.24"))),
            (Some(0.05), 0.1, Some(("0.05", "0.10"))),
            (Some(0.0), 0.1, Some(("0", "0.10"))),
            (Some(-3.0), 0.1, Some(("-3", "0.10"))),
            (Some(100.0), 25.0, Some(("100", "25.00"))),
            (Some(1e12), 25.0, Some(("1000000000000", "25.00"))),
            (Some(f64::NAN), 5.0, Some(("NaN", "5.00"))),
            (Some(f64::INFINITY), 5.0, Some(("inf", "5.00"))),
            (Some(f64::NEG_INFINITY), 5.0, Some(("-inf", "5.00"))),
        ];
        for &(requested, want, clamp) in cases {
            let mut clamps = Vec::new();
            let got = dollars("budget_usd", requested, range, &mut clamps);
            assert_eq!(got, want, "{requested:?}");
            let want_clamps: Vec<Clamp> = clamp
                .into_iter()
                .map(|(r, a)| Clamp {
                    field: "budget_usd".into(),
                    requested: r.into(),
                    applied: a.into(),
                })
                .collect();
            assert_eq!(clamps, want_clamps, "{requested:?}");
        }
        // Cents overflow to infinity and still land on the maximum.
        let mut clamps = Vec::new();
        assert_eq!(
            dollars("budget_usd", Some(f64::MAX), range, &mut clamps),
            25.0
        );
        assert_eq!(clamps.len(), 1);
    }
}
