//! Route cards and escalation from the command line: `drover routes`, `drover route RUN
//! N [--remember]`, `drover route RUN --decline`, `drover escalate RUN [--provider P
//! --model M]`, `drover retry RUN`.

use clap::{Args, Subcommand};

use super::headless::{ask, client_runtime};
use super::output::{JsonFlag, print_json, write_stdout};
use drover_core::clock::now_millis;
use drover_core::dispatch::api::OpenRoute;
use drover_core::dispatch::{Request, Response};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::money::usd_per_mtok;
use drover_core::paths::Paths;

#[derive(Debug, Subcommand)]
pub enum RouteCommand {
    /// The open route cards: runs waiting for you to pick where they run.
    Routes {
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Pick option N of a held run's route card (or decline it).
    Route(RouteArgs),
    /// Start a new run one tier up (or on --provider/--model), carrying the old result.
    Escalate {
        run: String,
        #[arg(long, requires = "model")]
        provider: Option<String>,
        #[arg(long, requires = "provider")]
        model: Option<String>,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Start the run again on the same model after a transient failure.
    Retry {
        run: String,
        #[command(flatten)]
        output: JsonFlag,
    },
}

impl RouteCommand {
    /// Whether the command only reads (`routes`).
    pub fn read_only(&self) -> bool {
        matches!(self, RouteCommand::Routes { .. })
    }

    /// The subcommand's name, for the log.
    pub fn name(&self) -> &'static str {
        match self {
            RouteCommand::Routes { .. } => "routes",
            RouteCommand::Route(_) => "route",
            RouteCommand::Escalate { .. } => "escalate",
            RouteCommand::Retry { .. } => "retry",
        }
    }
}

#[derive(Debug, Args)]
pub struct RouteArgs {
    pub run: String,
    /// The option's number on the card.
    #[arg(required_unless_present = "decline", conflicts_with = "decline")]
    pub option: Option<u32>,
    /// Skip the card next time for tasks of this class.
    #[arg(long, conflicts_with = "decline")]
    pub remember: bool,
    /// Decline the card: the run is stopped.
    #[arg(long)]
    pub decline: bool,
    #[command(flatten)]
    pub output: JsonFlag,
}

pub fn run(command: RouteCommand, paths: &Paths) -> Result<(), DroverError> {
    let (request, json) = match command {
        RouteCommand::Routes { output } => (Request::Routes, output.json),
        RouteCommand::Route(args) if args.decline => {
            (Request::RouteDecline { run_id: args.run }, args.output.json)
        }
        RouteCommand::Route(args) => (
            Request::Route {
                run_id: args.run,
                option: args.option.ok_or_else(|| {
                    DroverError::new(
                        ErrorCode::InvalidSpec,
                        "name the option to pick, or --decline",
                    )
                })?,
                remember: args.remember,
            },
            args.output.json,
        ),
        RouteCommand::Escalate {
            run,
            provider,
            model,
            output,
        } => (
            Request::Escalate {
                run_id: run,
                provider,
                model,
            },
            output.json,
        ),
        RouteCommand::Retry { run, output } => (Request::Retry { run_id: run }, output.json),
    };
    let answer = client_runtime()?.block_on(ask(paths, request.clone()))?;
    if json {
        return print_json(&answer);
    }
    write_stdout(&human(&request, &answer))
}

fn human(request: &Request, answer: &Response) -> String {
    match (request, answer) {
        (_, Response::Routes(cards)) => routes(cards),
        (Request::Route { run_id, .. }, Response::Run(run)) => format!(
            "{run_id} runs on {}/{} ({})\n",
            run.head.provider,
            run.head.model.as_deref().unwrap_or("?"),
            run.head.state
        ),
        (Request::RouteDecline { run_id }, _) => {
            format!("declined the route card of {run_id}\n")
        }
        (Request::Escalate { run_id, .. } | Request::Retry { run_id }, Response::Run(run)) => {
            format!(
                "{} (from {run_id}) on {}/{}\n",
                run.head.run_id,
                run.head.provider,
                run.head.model.as_deref().unwrap_or("?")
            )
        }
        _ => super::render::pretty_json(answer),
    }
}

fn routes(cards: &[OpenRoute]) -> String {
    if cards.is_empty() {
        return "no open route cards\n".to_string();
    }
    let now = now_millis();
    let mut out = String::new();
    for entry in cards {
        let run_id = &entry.run_id;
        let title = &entry.title;
        let card = &entry.card;
        out.push_str(&format!(
            "{run_id}  {title}  ({} task, expires in {})\n",
            card.class,
            drover_core::text::duration_words(card.expires_at - now)
        ));
        for o in &card.options {
            let price = if o.free {
                "free".to_string()
            } else {
                match (o.input_per_mtok, o.output_per_mtok) {
                    (Some(i), Some(p)) => {
                        format!("{}/{} per Mtok", usd_per_mtok(i), usd_per_mtok(p))
                    }
                    _ => "no price".to_string(),
                }
            };
            out.push_str(&format!(
                "  {}. {}/{}  {}  {price}  {}{}  {}{}\n",
                o.number,
                o.provider,
                o.model,
                o.tier,
                o.context_window
                    .map(|c| format!("{} context", drover_core::route::tokens_short(c)))
                    .unwrap_or_default(),
                if o.vision { " · vision" } else { "" },
                o.reason,
                if o.recommended { "  (recommended)" } else { "" }
            ));
        }
        if let Some(refused) = &card.refused {
            out.push_str(&format!("  refused: {refused}\n"));
        }
        out.push_str(&format!(
            "  pick: drover route {run_id} N [--remember] · decline: drover route {run_id} --decline\n"
        ));
    }
    out
}
