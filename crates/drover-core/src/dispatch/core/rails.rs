//! Rails and the queue (docs/ARCHITECTURE.md §"Rails and the queue"): how many runs may
//! hold a slot at once, per provider, per budget session and per workflow, and which queued
//! run starts next. Pure.
//!
//! What must stay true: a run starts only when every rail it belongs to has room; the
//! queue is FIFO but skips runs whose rail is still full; money goes in order — a run
//! waiting for money in a budget session holds back the runs queued behind it in that
//! session that need money too ([`next_in_order`]); a full queue refuses.

use crate::config::Limits;
use crate::{DroverError, ErrorCode};

/// The rails one run belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailSlot {
    /// The run's provider.
    pub provider: String,
    /// The provider account the run uses, when the config names one (see
    /// [`account_of`]); runs of one account share the per-account rail.
    pub account: Option<String>,
    /// The run's budget session.
    pub session: String,
    /// The run's workflow, if any.
    pub workflow: Option<String>,
}

/// The account a provider's runs use: the value of its account variable (see
/// [`crate::providers::ProviderTraits::account_variable`]) in the provider's configured
/// environment, if set.
pub fn account_of(
    provider: &str,
    env: &std::collections::BTreeMap<String, String>,
) -> Option<String> {
    let var = crate::providers::traits(provider)?.account_variable?;
    env.get(var).map(|dir| format!("{provider}:{dir}"))
}

/// The rail that keeps a run from starting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RailBlock {
    /// The provider already runs its `[limits.per_provider]` runs.
    Provider {
        /// The provider.
        provider: String,
        /// How many runs the rail allows at once.
        limit: u32,
    },
    /// The account already runs `[limits] per_account` runs.
    Account {
        /// The account (`<provider>:<value of its account variable>`).
        account: String,
        /// How many runs the rail allows at once.
        limit: u32,
    },
    /// The budget session already runs `[limits] per_session_running` runs.
    Session {
        /// The budget session.
        session: String,
        /// How many runs the rail allows at once.
        limit: u32,
    },
    /// The workflow already runs `[limits] per_workflow` runs.
    Workflow {
        /// The workflow.
        workflow: String,
        /// How many runs the rail allows at once.
        limit: u32,
    },
}

/// `s` after a count of runs other than one.
fn plural(n: u32) -> &'static str {
    crate::text::plural(n as usize)
}

impl RailBlock {
    /// The block in one sentence, for notes and refusals.
    pub fn describe(&self) -> String {
        match self {
            RailBlock::Provider { provider, limit } => {
                format!(
                    "{provider} already runs {limit} run{} (its limit)",
                    plural(*limit)
                )
            }
            RailBlock::Account { account, limit } => {
                format!(
                    "account {account} already runs {limit} run{} (its limit)",
                    plural(*limit)
                )
            }
            RailBlock::Session { session, limit } => {
                format!(
                    "budget session {session} already runs {limit} run{} (its limit)",
                    plural(*limit)
                )
            }
            RailBlock::Workflow { workflow, limit } => {
                format!(
                    "workflow {workflow} already runs {limit} run{} (its limit)",
                    plural(*limit)
                )
            }
        }
    }
}

/// What to do with a new run.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Every rail has room: start now.
    Start,
    /// A rail is full: queue the run behind it.
    Queue(RailBlock),
    /// A rail is full and the run may not queue, or the queue is full.
    Refuse(DroverError),
}

/// The first rail that is full for `candidate`, given the runs holding slots.
pub fn blocked_by(
    limits: &Limits,
    holding: &[RailSlot],
    candidate: &RailSlot,
) -> Option<RailBlock> {
    let provider_limit = limits
        .per_provider
        .get(&candidate.provider)
        .copied()
        .unwrap_or(1);
    if holding
        .iter()
        .filter(|s| s.provider == candidate.provider)
        .count() as u32
        >= provider_limit
    {
        return Some(RailBlock::Provider {
            provider: candidate.provider.clone(),
            limit: provider_limit,
        });
    }
    if let Some(account) = &candidate.account
        && holding
            .iter()
            .filter(|s| s.account.as_ref() == Some(account))
            .count() as u32
            >= limits.per_account
    {
        return Some(RailBlock::Account {
            account: account.clone(),
            limit: limits.per_account,
        });
    }
    if holding
        .iter()
        .filter(|s| s.session == candidate.session)
        .count() as u32
        >= limits.per_session_running
    {
        return Some(RailBlock::Session {
            session: candidate.session.clone(),
            limit: limits.per_session_running,
        });
    }
    if let Some(w) = &candidate.workflow
        && holding
            .iter()
            .filter(|s| s.workflow.as_ref() == Some(w))
            .count() as u32
            >= limits.per_workflow
    {
        return Some(RailBlock::Workflow {
            workflow: w.clone(),
            limit: limits.per_workflow,
        });
    }
    None
}

/// Start, queue or refuse a new run. `queued_in_session` counts runs already queued in
/// the candidate's budget session.
pub fn admit(
    limits: &Limits,
    holding: &[RailSlot],
    queued_in_session: usize,
    candidate: &RailSlot,
    queue_if_busy: bool,
) -> Admission {
    let Some(block) = blocked_by(limits, holding, candidate) else {
        return Admission::Start;
    };
    if !queue_if_busy {
        return Admission::Refuse(DroverError::new(
            ErrorCode::MaxConcurrent,
            format!(
                "{}; wait for one to end, or dispatch without --no-queue to queue it",
                block.describe()
            ),
        ));
    }
    if queued_in_session as u32 >= limits.queued_per_session {
        return Admission::Refuse(DroverError::new(
            ErrorCode::QueueFull,
            format!(
                "{} runs are already queued in budget session {} (the limit); wait for the \
                 queue to drain or stop queued runs",
                limits.queued_per_session, candidate.session
            ),
        ));
    }
    Admission::Queue(block)
}

/// The index of the first queued run (oldest first) whose rails have room, if any.
pub fn next_to_start(limits: &Limits, holding: &[RailSlot], queue: &[RailSlot]) -> Option<usize> {
    queue
        .iter()
        .position(|candidate| blocked_by(limits, holding, candidate).is_none())
}

/// One run waiting in the queue, as [`next_in_order`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The rails it belongs to.
    pub slot: RailSlot,
    /// It already holds its slot (an idle run whose follow-up waits for money): no rail
    /// keeps it back.
    pub holds_slot: bool,
    /// What its turn needs is free in its budget session now.
    pub money_fits: bool,
}

/// The index of the queued run to start next: the oldest whose rails have room and whose
/// money fits, where a run whose rails have room but whose money does not fit keeps the
/// runs behind it in its budget session waiting (money goes in order: a small run does not
/// take what a bigger one ahead of it waits for).
pub fn next_in_order(limits: &Limits, holding: &[RailSlot], queue: &[Waiting]) -> Option<usize> {
    let mut short: Vec<&str> = Vec::new();
    for (index, waiting) in queue.iter().enumerate() {
        if !waiting.holds_slot && blocked_by(limits, holding, &waiting.slot).is_some() {
            continue;
        }
        if short.contains(&waiting.slot.session.as_str()) {
            continue;
        }
        if !waiting.money_fits {
            short.push(&waiting.slot.session);
            continue;
        }
        return Some(index);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn slot(provider: &str, workflow: Option<&str>) -> RailSlot {
        RailSlot {
            provider: provider.into(),
            account: None,
            session: "default".into(),
            workflow: workflow.map(str::to_string),
        }
    }

    fn limits() -> Limits {
        Config::defaults().limits
    }

    #[test]
    fn provider_session_and_workflow_rails() {
        let l = limits();
        let three_claude = vec![slot("claude-code", None); 3];
        let cases: Vec<(&str, Vec<RailSlot>, RailSlot, Option<&str>)> = vec![
            ("empty", vec![], slot("claude-code", None), None),
            (
                "two of three",
                vec![slot("claude-code", None); 2],
                slot("claude-code", None),
                None,
            ),
            (
                "claude full",
                three_claude.clone(),
                slot("claude-code", None),
                Some("provider"),
            ),
            ("other provider free", three_claude, slot("sim", None), None),
            (
                "session full",
                vec![slot("sim", None); 5],
                slot("sim", None),
                Some("session"),
            ),
            (
                "workflow full",
                vec![slot("sim", Some("w")); 4],
                slot("sim", Some("w")),
                None,
            ),
            (
                "unknown provider gets one slot",
                vec![slot("mystery", None)],
                slot("mystery", None),
                Some("provider"),
            ),
        ];
        for (name, holding, candidate, want) in cases {
            let got = blocked_by(&l, &holding, &candidate).map(|b| match b {
                RailBlock::Provider { .. } => "provider",
                RailBlock::Account { .. } => "account",
                RailBlock::Session { .. } => "session",
                RailBlock::Workflow { .. } => "workflow",
            });
            assert_eq!(got, want, "{name}");
        }
        let mut tight = l.clone();
        tight.per_workflow = 2;
        assert!(matches!(
            blocked_by(
                &tight,
                &vec![slot("sim", Some("w")); 2],
                &slot("sim", Some("w"))
            ),
            Some(RailBlock::Workflow { .. })
        ));
    }

    #[test]
    fn runs_of_one_named_account_share_its_rail() {
        let l = limits();
        let mut env = std::collections::BTreeMap::new();
        assert_eq!(account_of("claude-code", &env), None);
        env.insert(
            "CLAUDE_CONFIG_DIR".to_string(),
            "/home/me/.claude-work".to_string(),
        );
        let account = account_of("claude-code", &env);
        assert_eq!(
            account.as_deref(),
            Some("claude-code:/home/me/.claude-work")
        );
        assert_eq!(account_of("sim", &env), None);
        let with_account = RailSlot {
            account,
            ..slot("claude-code", None)
        };
        let two = vec![with_account.clone(); 2];
        assert!(matches!(
            blocked_by(&l, &two, &with_account),
            Some(RailBlock::Account { limit: 2, .. })
        ));
        // Without a named account only the provider rail (3) applies.
        assert_eq!(
            blocked_by(
                &l,
                &vec![slot("claude-code", None); 2],
                &slot("claude-code", None)
            ),
            None
        );
    }

    #[test]
    fn admission_starts_queues_or_refuses() {
        let l = limits();
        let full = vec![slot("claude-code", None); 3];
        assert_eq!(
            admit(&l, &[], 0, &slot("claude-code", None), true),
            Admission::Start
        );
        assert!(matches!(
            admit(&l, &full, 0, &slot("claude-code", None), true),
            Admission::Queue(RailBlock::Provider { limit: 3, .. })
        ));
        let Admission::Refuse(e) = admit(&l, &full, 0, &slot("claude-code", None), false) else {
            panic!("expected a refusal")
        };
        assert_eq!(e.code, ErrorCode::MaxConcurrent);
        assert!(e.message.contains("--no-queue"));
        let Admission::Refuse(e) = admit(&l, &full, 20, &slot("claude-code", None), true) else {
            panic!("expected a refusal")
        };
        assert_eq!(e.code, ErrorCode::QueueFull);
    }

    #[test]
    fn the_queue_is_fifo_but_skips_runs_whose_rail_is_full() {
        let l = limits();
        let holding = vec![slot("claude-code", None); 3];
        let queue = vec![
            slot("claude-code", None),
            slot("sim", None),
            slot("sim", None),
        ];
        assert_eq!(next_to_start(&l, &holding, &queue), Some(1));
        assert_eq!(next_to_start(&l, &holding, &queue[..1]), None);
        assert_eq!(next_to_start(&l, &holding[..2], &queue), Some(0));
    }

    #[test]
    fn money_goes_in_order_within_a_budget_session() {
        let l = limits();
        let waiting = |provider: &str, session: &str, holds_slot, money_fits| Waiting {
            slot: RailSlot {
                session: session.into(),
                ..slot(provider, None)
            },
            holds_slot,
            money_fits,
        };
        let full = vec![slot("claude-code", None); 3];
        type Case = (&'static str, Vec<RailSlot>, Vec<Waiting>, Option<usize>);
        // (name, holding, queue, expected)
        let cases: Vec<Case> = vec![
            (
                "the first that fits",
                vec![],
                vec![waiting("sim", "default", false, true)],
                Some(0),
            ),
            (
                "a run short of money holds back its session",
                vec![],
                vec![
                    waiting("sim", "default", false, false),
                    waiting("sim", "default", false, true),
                ],
                None,
            ),
            (
                "but not another session",
                vec![],
                vec![
                    waiting("sim", "default", false, false),
                    waiting("sim", "other", false, true),
                ],
                Some(1),
            ),
            (
                "a run whose rail is full holds back no money",
                full.clone(),
                vec![
                    waiting("claude-code", "default", false, false),
                    waiting("sim", "default", false, true),
                ],
                Some(1),
            ),
            (
                "a run that holds its slot passes a full rail",
                full,
                vec![waiting("claude-code", "default", true, true)],
                Some(0),
            ),
        ];
        for (name, holding, queue, want) in cases {
            assert_eq!(next_in_order(&l, &holding, &queue), want, "{name}");
        }
    }
}
