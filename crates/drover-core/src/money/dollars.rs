//! Dollar amounts: what counts as one, and how one reads on a screen or in a sentence.
//!
//! Owns the two ways drover writes dollars: an amount of money with cents ([`usd`]:
//! spend, caps, budgets) and a price per million tokens ([`usd_per_mtok`]: catalog
//! prices, routing thresholds). What must stay true: neither ever shows `$-0.00` or
//! `$NaN`; a value that is not a finite number reads as `$?`.

/// Whether `value` is a dollar amount drover accepts: a finite number, 0 or more.
pub fn is_amount(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

/// An amount with cents: `$3.21`, `$25.00`; `$?` when it is not a finite number.
pub fn usd(dollars: f64) -> String {
    if !dollars.is_finite() {
        return "$?".to_string();
    }
    format!("${}", without_negative_zero(format!("{dollars:.2}")))
}

/// A price per million tokens: `$3` for whole dollars, else up to three decimals with at
/// least two (`$0.50`, `$1.25`, `$0.075`); `$?` when it is not a finite number.
pub fn usd_per_mtok(price: f64) -> String {
    if !price.is_finite() {
        return "$?".to_string();
    }
    let text = if price.fract() == 0.0 {
        format!("{price:.0}")
    } else {
        let three = format!("{price:.3}");
        match three.strip_suffix('0') {
            Some(two) => two.to_string(),
            None => three,
        }
    };
    format!("${}", without_negative_zero(text))
}

/// `-0.00` (a small negative amount, or a negative zero, rounded away) as `0.00`.
fn without_negative_zero(number: String) -> String {
    match number.strip_prefix('-') {
        Some(rest) if rest.bytes().all(|b| b == b'0' || b == b'.') => rest.to_string(),
        _ => number,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_with_cents_and_never_as_negative_zero() {
        let cases: &[(f64, &str)] = &[
            (3.21, "$3.21"),
            (25.0, "$25.00"),
            (0.0, "$0.00"),
            (-0.0, "$0.00"),
            (-0.001, "$0.00"),
            (-1.5, "$-1.50"),
            (f64::NAN, "$?"),
            (f64::INFINITY, "$?"),
            (f64::NEG_INFINITY, "$?"),
        ];
        for &(dollars, want) in cases {
            assert_eq!(usd(dollars), want, "usd({dollars})");
        }
    }

    #[test]
    fn prices_per_mtok_drop_needless_zeros() {
        let cases: &[(f64, &str)] = &[
            (3.0, "$3"),
            (15.0, "$15"),
            (0.5, "$0.50"),
            (1.25, "$1.25"),
            (0.075, "$0.075"),
            (0.1, "$0.10"),
            (0.0, "$0"),
            (-0.0, "$0"),
            (f64::NAN, "$?"),
        ];
        for &(price, want) in cases {
            assert_eq!(usd_per_mtok(price), want, "usd_per_mtok({price})");
        }
    }

    #[test]
    fn amounts_are_finite_and_not_negative() {
        assert!(is_amount(0.0));
        assert!(is_amount(12.5));
        assert!(!is_amount(-0.01));
        assert!(!is_amount(f64::NAN));
        assert!(!is_amount(f64::INFINITY));
    }
}
