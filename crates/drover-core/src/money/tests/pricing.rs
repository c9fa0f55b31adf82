use crate::ledger::UsageRecord;
use crate::money::catalog::Catalog;
use crate::money::pricing::{
    Basis, Fidelity, Part, Price, RunSpend, UsageDraft, claude_turn, estimated, reported,
    total_cost_delta, weakest_basis,
};
use crate::providers::{ModelUsage, Tokens, TurnEnd};

fn tokens(input: u64, output: u64, reasoning: u64, cache_read: u64, cache_write: u64) -> Tokens {
    Tokens {
        input,
        output,
        reasoning,
        cache_read,
        cache_write,
    }
}

const PRICE: Price = Price::Priced {
    input: 3.0,
    output: 15.0,
    cache_read: 0.3,
    cache_write: 3.75,
};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn tokens_times_price_counts_all_five_classes() {
    let cases: &[(Tokens, Price, Option<f64>)] = &[
        (Tokens::default(), PRICE, Some(0.0)),
        // one million of each class costs its price
        (tokens(1_000_000, 0, 0, 0, 0), PRICE, Some(3.0)),
        (tokens(0, 1_000_000, 0, 0, 0), PRICE, Some(15.0)),
        // reasoning is billed at the output price
        (tokens(0, 0, 1_000_000, 0, 0), PRICE, Some(15.0)),
        (tokens(0, 0, 0, 1_000_000, 0), PRICE, Some(0.3)),
        (tokens(0, 0, 0, 0, 1_000_000), PRICE, Some(3.75)),
        // all together: 1000×3 + 2000×15 + 500×15 + 10000×0.3 + 4000×3.75 per million
        (
            tokens(1_000, 2_000, 500, 10_000, 4_000),
            PRICE,
            Some(0.003 + 0.030 + 0.0075 + 0.003 + 0.015),
        ),
        (tokens(7, 7, 7, 7, 7), Price::Free, Some(0.0)),
        // unpriced is no amount at all, never $0
        (tokens(7, 7, 7, 7, 7), Price::Unpriced, None),
    ];
    for (t, price, want) in cases {
        let got = price.cost(t);
        match (got, want) {
            (Some(g), Some(w)) => assert!(close(g, *w), "{t:?} at {price:?}: {g} != {w}"),
            (g, w) => assert_eq!(g, *w, "{t:?} at {price:?}"),
        }
    }
}

#[test]
fn estimated_rows_carry_the_basis_of_their_price() {
    let t = tokens(1_000_000, 0, 0, 0, 0);
    let cases: &[(Price, Option<f64>, Basis)] = &[
        (PRICE, Some(3.0), Basis::Estimated),
        (Price::Free, Some(0.0), Basis::Free),
        (Price::Unpriced, None, Basis::Unpriced),
    ];
    for (price, cost, basis) in cases {
        let row = estimated(Some("m"), t, price, Fidelity::Exact, "turn.completed");
        assert_eq!(row.cost_usd, *cost);
        assert_eq!(row.basis, *basis);
        assert_eq!(row.model.as_deref(), Some("m"));
        assert_eq!(row.source, "turn.completed");
    }
}

#[test]
fn reported_dollars_are_booked_as_reported() {
    let t = tokens(10, 10, 0, 0, 0);
    let row = reported(
        Some("m"),
        t,
        0.25,
        &PRICE,
        Fidelity::Exact,
        "message.updated",
    );
    assert_eq!((row.cost_usd, row.basis), (Some(0.25), Basis::Reported));
    // even when the catalog has no price: the provider said what it cost
    let row = reported(None, t, 0.25, &Price::Unpriced, Fidelity::Exact, "s");
    assert_eq!((row.cost_usd, row.basis), (Some(0.25), Basis::Reported));
    // nothing charged for a free model is free
    let row = reported(None, t, 0.0, &Price::Free, Fidelity::Exact, "s");
    assert_eq!((row.cost_usd, row.basis), (Some(0.0), Basis::Free));
    // a charge for a model the catalog calls free is still booked
    let row = reported(None, t, 0.5, &Price::Free, Fidelity::Exact, "s");
    assert_eq!((row.cost_usd, row.basis), (Some(0.5), Basis::Reported));
    // a nonsense amount falls back to the catalog, flagged partial
    let row = reported(
        None,
        tokens(1_000_000, 0, 0, 0, 0),
        f64::NAN,
        &PRICE,
        Fidelity::Exact,
        "s",
    );
    assert_eq!(
        (row.cost_usd, row.basis, row.fidelity),
        (Some(3.0), Basis::Estimated, Fidelity::Partial)
    );
    let row = reported(None, t, -1.0, &Price::Unpriced, Fidelity::Exact, "s");
    assert_eq!((row.cost_usd, row.basis), (None, Basis::Unpriced));
}

#[test]
fn a_turn_costs_the_growth_of_the_running_total() {
    let cases: &[(f64, f64, f64)] = &[
        (0.0, 0.1046, 0.1046),
        (0.1046, 0.25, 0.1454),
        (0.3, 0.3, 0.0),
        // float noise does not make cents appear or vanish
        (0.1 + 0.2, 0.6, 0.3),
        // a smaller total: the process started counting again (a resumed session)
        (1.20, 0.05, 0.05),
    ];
    for &(previous, total, want) in cases {
        let got = total_cost_delta(previous, total);
        assert!(close(got, want), "{previous} → {total}: {got} != {want}");
    }
}

fn usage(model: &str, t: Tokens, cost: Option<f64>) -> ModelUsage {
    ModelUsage {
        model: model.into(),
        tokens: t,
        cost_usd: cost,
    }
}

fn end(total: Option<f64>, t: Tokens, models: Vec<ModelUsage>) -> TurnEnd {
    TurnEnd {
        total_cost_usd: total,
        tokens: t,
        model_usage: models,
        ..TurnEnd::default()
    }
}

fn sum(rows: &[UsageDraft]) -> f64 {
    rows.iter().filter_map(|r| r.cost_usd).sum()
}

fn no_price(_: &str) -> Price {
    Price::Unpriced
}

#[test]
fn a_claude_turn_with_one_model_is_one_exact_row() {
    let t = tokens(2, 9, 0, 13_368, 7_924);
    let turn = claude_turn(
        &end(Some(0.5), t, vec![usage("claude-sonnet-5-5", t, Some(0.4))]),
        0.1,
        Some("claude-sonnet-5-5"),
        no_price,
    );
    assert_eq!(turn.charge, Some(0.4));
    assert_eq!(turn.running_total, 0.5);
    assert_eq!(turn.rows.len(), 1);
    let row = &turn.rows[0];
    assert_eq!(row.model.as_deref(), Some("claude-sonnet-5-5"));
    assert_eq!(
        (row.part, row.basis, row.fidelity),
        (Part::Main, Basis::Reported, Fidelity::Exact)
    );
    assert_eq!(row.cost_usd, Some(0.4));
    assert_eq!(row.tokens, t);
}

#[test]
fn a_claude_turn_charge_is_split_across_models_by_their_reported_cost() {
    let sonnet = tokens(100, 50, 0, 1_000, 0);
    let haiku = tokens(300, 20, 0, 0, 0);
    let turn = claude_turn(
        &end(
            Some(0.30),
            tokens(100, 50, 0, 1_000, 0),
            vec![
                usage("claude-haiku-5-5", haiku, Some(0.05)),
                usage("claude-sonnet-5-5", sonnet, Some(0.15)),
            ],
        ),
        0.10,
        Some("claude-sonnet-5-5"),
        no_price,
    );
    assert_eq!(turn.charge, Some(0.2));
    let rows = &turn.rows;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].model.as_deref(), Some("claude-haiku-5-5"));
    assert_eq!(rows[0].part, Part::Subagents);
    assert_eq!(rows[0].tokens, haiku);
    assert!(close(rows[0].cost_usd.unwrap(), 0.05));
    assert_eq!(rows[1].part, Part::Main);
    assert!(close(rows[1].cost_usd.unwrap(), 0.15));
    assert!(
        rows.iter()
            .all(|r| r.fidelity == Fidelity::Exact && r.basis == Basis::Reported)
    );
    assert_eq!(sum(rows), 0.2);
}

#[test]
fn a_split_that_does_not_add_up_is_scaled_to_the_charge_and_marked_partial() {
    // the models report $0.10 + $0.30, the total grew by $0.20: shares 1/4 and 3/4
    let turn = claude_turn(
        &end(
            Some(0.2),
            Tokens::default(),
            vec![
                usage("a", tokens(1, 1, 0, 0, 0), Some(0.10)),
                usage("b", tokens(3, 3, 0, 0, 0), Some(0.30)),
                // no cost reported: its tokens are kept at $0 of the charge
                usage("c", tokens(5, 5, 0, 0, 0), None),
            ],
        ),
        0.0,
        None,
        no_price,
    );
    let costs: Vec<f64> = turn.rows.iter().map(|r| r.cost_usd.unwrap()).collect();
    assert!(
        close(costs[0], 0.05) && close(costs[1], 0.15) && costs[2] == 0.0,
        "{costs:?}"
    );
    assert_eq!(sum(&turn.rows), 0.2);
    assert!(turn.rows.iter().all(|r| r.fidelity == Fidelity::Partial));
    // no row is the run's model: the costliest is main
    let parts: Vec<Part> = turn.rows.iter().map(|r| r.part).collect();
    assert_eq!(parts, [Part::Subagents, Part::Main, Part::Subagents]);
}

#[test]
fn split_rows_always_add_up_to_the_charge_exactly() {
    let thirds = vec![
        usage("a", Tokens::default(), Some(1.0)),
        usage("b", Tokens::default(), Some(1.0)),
        usage("c", Tokens::default(), Some(1.0)),
    ];
    for charge in [0.01, 0.1, 1.0, 0.333_333_333_3, 7.77] {
        let turn = claude_turn(
            &end(Some(charge), Tokens::default(), thirds.clone()),
            0.0,
            None,
            no_price,
        );
        assert!(close(sum(&turn.rows), charge), "{charge}: {:?}", turn.rows);
    }
}

#[test]
fn a_claude_turn_without_model_costs_is_one_row_of_the_whole_charge() {
    let t = tokens(10, 4, 0, 0, 0);
    // no modelUsage at all: the result's own tokens
    let turn = claude_turn(
        &end(Some(0.0123), t, vec![]),
        0.0,
        Some("claude-sonnet-5-5"),
        no_price,
    );
    assert_eq!(turn.rows.len(), 1);
    let row = &turn.rows[0];
    assert_eq!(row.model.as_deref(), Some("claude-sonnet-5-5"));
    assert_eq!((row.cost_usd, row.tokens), (Some(0.0123), t));
    assert_eq!(
        (row.fidelity, row.source.as_str()),
        (Fidelity::Exact, "result.total_cost_usd")
    );

    // several models, none with a cost: their tokens lumped, partial
    let turn = claude_turn(
        &end(
            Some(0.5),
            Tokens::default(),
            vec![
                usage("a", tokens(1, 0, 0, 0, 0), None),
                usage("b", tokens(2, 0, 0, 0, 0), None),
            ],
        ),
        0.0,
        None,
        no_price,
    );
    assert_eq!(turn.rows.len(), 1);
    assert_eq!(turn.rows[0].tokens, tokens(3, 0, 0, 0, 0));
    assert_eq!(turn.rows[0].model.as_deref(), Some("a"));
    assert_eq!(turn.rows[0].fidelity, Fidelity::Partial);
    assert_eq!(turn.rows[0].cost_usd, Some(0.5));
}

#[test]
fn a_claude_turn_without_a_total_books_model_costs_or_prices_tokens() {
    let catalog = Catalog::embedded();
    let price_of = |m: &str| catalog.price("claude-code", m);
    let turn = claude_turn(
        &end(
            None,
            Tokens::default(),
            vec![
                usage("claude-sonnet-5-5", tokens(1, 1, 0, 0, 0), Some(0.02)),
                usage("haiku", tokens(1_000_000, 0, 0, 0, 0), None),
                usage("claude-nine", tokens(5, 5, 0, 0, 0), None),
            ],
        ),
        0.75,
        Some("claude-sonnet-5-5"),
        price_of,
    );
    assert_eq!(turn.charge, None);
    // the running total stays where it was
    assert_eq!(turn.running_total, 0.75);
    let summary: Vec<(Option<f64>, Basis, Part)> = turn
        .rows
        .iter()
        .map(|r| (r.cost_usd, r.basis, r.part))
        .collect();
    assert_eq!(
        summary,
        [
            (Some(0.02), Basis::Reported, Part::Main),
            (Some(0.1), Basis::Estimated, Part::Subagents),
            (None, Basis::Unpriced, Part::Subagents),
        ]
    );

    // only the result's tokens: priced on the run's model
    let turn = claude_turn(
        &end(None, tokens(1_000_000, 0, 0, 0, 0), vec![]),
        0.0,
        Some("sonnet"),
        price_of,
    );
    assert_eq!(turn.rows.len(), 1);
    assert_eq!(
        (turn.rows[0].cost_usd, turn.rows[0].basis),
        (Some(2.0), Basis::Estimated)
    );
    // no model known: unpriced, not $0
    let turn = claude_turn(
        &end(None, tokens(5, 5, 0, 0, 0), vec![]),
        0.0,
        None,
        price_of,
    );
    assert_eq!(
        (turn.rows[0].cost_usd, turn.rows[0].basis),
        (None, Basis::Unpriced)
    );
    // nothing reported: no row
    assert!(
        claude_turn(&end(None, Tokens::default(), vec![]), 0.0, None, price_of)
            .rows
            .is_empty()
    );
    // a nonsense total is ignored
    let turn = claude_turn(
        &end(Some(f64::NAN), Tokens::default(), vec![]),
        0.4,
        None,
        price_of,
    );
    assert_eq!((turn.charge, turn.running_total), (None, 0.4));
}

#[test]
fn a_resumed_claude_session_counts_from_zero() {
    let turn = claude_turn(
        &end(Some(0.05), tokens(1, 1, 0, 0, 0), vec![]),
        1.20,
        None,
        no_price,
    );
    assert_eq!(turn.charge, Some(0.05));
    assert_eq!(turn.running_total, 0.05);
}

#[test]
fn the_weakest_basis_wins() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "free"),
        (&["free"], "free"),
        (&["free", "reported"], "reported"),
        (&["reported", "estimated", "free"], "estimated"),
        (&["estimated", "unpriced", "reported"], "unpriced"),
        (&["reported", "something-new"], "unpriced"),
    ];
    for (bases, weakest) in cases {
        assert_eq!(weakest_basis(bases.iter().copied()), *weakest, "{bases:?}");
    }
    assert!(Basis::Unpriced < Basis::Estimated);
    assert!(Basis::Estimated < Basis::Reported);
    assert!(Basis::Reported < Basis::Free);
}

fn record(cost: Option<f64>, basis: &str, t: Tokens) -> UsageRecord {
    UsageDraft {
        model: Some("m".into()),
        part: Part::Main,
        tokens: t,
        cost_usd: cost,
        basis: Basis::parse(basis),
        fidelity: Fidelity::Exact,
        source: "s".into(),
    }
    .into_record("r1", Some(1), 1_000, "sim", "default")
}

#[test]
fn drafts_become_ledger_rows_and_rows_add_up_to_a_run_spend() {
    let row = record(Some(0.25), "estimated", tokens(1, 2, 3, 4, 5));
    assert_eq!(
        (row.run_id.as_str(), row.turn, row.at, row.provider.as_str()),
        ("r1", Some(1), 1_000, "sim")
    );
    assert_eq!(
        (row.part.as_str(), row.basis.as_str(), row.fidelity.as_str()),
        ("main", "estimated", "exact")
    );
    assert_eq!(
        (
            row.input,
            row.output,
            row.reasoning,
            row.cache_read,
            row.cache_write
        ),
        (1, 2, 3, 4, 5)
    );
    assert_eq!(row.budget_session, "default");

    let rows = [
        record(Some(0.1), "reported", tokens(1, 1, 0, 0, 0)),
        record(Some(0.2), "estimated", tokens(2, 2, 1, 0, 0)),
        record(None, "unpriced", tokens(3, 0, 0, 0, 0)),
    ];
    let spend = RunSpend::from_rows(&rows);
    assert_eq!(spend.cost_usd, 0.3);
    assert_eq!(spend.tokens, tokens(6, 3, 1, 0, 0));
    assert_eq!(spend.basis, Basis::Unpriced);
    assert_eq!(spend.unpriced_rows, 1);
    let none = RunSpend::from_rows(&[]);
    assert_eq!(
        (none.cost_usd, none.basis, none.unpriced_rows),
        (0.0, Basis::Free, 0)
    );
}
