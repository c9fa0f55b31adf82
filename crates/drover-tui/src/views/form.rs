//! The new-dispatch form: task, provider, model (picked from the catalog), policy, budget,
//! working directory, host (when hosts are configured), workspace, sandbox, class, max turns,
//! tags, workflow, context and, for the simulated provider, the scenario; empty, or filled from the spec of a run to dispatch
//! its task again ([`DispatchForm::again`]). It draws itself as a box of fields, with the
//! model picker under the model field while it has the focus.
//!
//! What must stay true: the form only builds a [`SpecInput`]; the dispatcher validates
//! it, and its refusal (code and sentence) is shown inline next to the field it is about,
//! with the form left as the user typed it. Blank fields are sent as absent, so the
//! dispatcher's defaults apply.

use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use std::path::PathBuf;

use super::text::TextField;
use super::{DrawContext, Outcome, View, ViewCommand};
use crate::canvas::{clip_width, put_line, view_box, wrap};
use crate::event::ReplyTag;
use crate::keys::{Action, Context};
use crate::layout::centered;
use crate::theme;
use drover_core::dispatch::Request;
use drover_core::error::{DroverError, ErrorCode};
use drover_core::spec::SpecInput;

/// The form's fields, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Task,
    Provider,
    Model,
    Policy,
    Budget,
    Cwd,
    Host,
    Workspace,
    Sandbox,
    Class,
    MaxTurns,
    Tags,
    Workflow,
    Context,
    Scenario,
}

impl Field {
    pub fn label(self) -> &'static str {
        match self {
            Field::Task => "Task",
            Field::Provider => "Provider",
            Field::Model => "Model",
            Field::Policy => "Policy",
            Field::Budget => "Budget $",
            Field::Cwd => "Directory",
            Field::Host => "Host",
            Field::Workspace => "Workspace",
            Field::Sandbox => "Sandbox",
            Field::Class => "Class",
            Field::MaxTurns => "Max turns",
            Field::Tags => "Tags",
            Field::Workflow => "Workflow",
            Field::Context => "Context",
            Field::Scenario => "Scenario",
        }
    }

    /// What a blank field means (the budget's default is the form's: see
    /// [`DispatchForm::placeholder`]).
    fn blank_words(self) -> &'static str {
        match self {
            Field::Task => "what should the agent do?",
            Field::Model => "provider default (←/→ picks from the catalog)",
            Field::Class => "from the task (code, review, research, design, docs)",
            Field::MaxTurns => "default",
            Field::Tags => "none (comma-separated)",
            Field::Workflow => "none",
            Field::Context => "none (what the agent should know first)",
            _ => "",
        }
    }

    /// The field a dispatcher refusal is about.
    fn of_error(code: ErrorCode) -> Option<Field> {
        Some(match code {
            ErrorCode::TaskRequired | ErrorCode::TaskTooLong => Field::Task,
            ErrorCode::InvalidProvider | ErrorCode::ProviderUnavailable => Field::Provider,
            ErrorCode::ScenarioUnknown => Field::Scenario,
            ErrorCode::ModelUnknown | ErrorCode::ModelDisabled => Field::Model,
            ErrorCode::PermissionPolicyUnsupported => Field::Policy,
            ErrorCode::BudgetExceeded | ErrorCode::BudgetUnpriced => Field::Budget,
            ErrorCode::CwdInvalid => Field::Cwd,
            ErrorCode::HostUnknown | ErrorCode::HostUnsupported | ErrorCode::HostUnreachable => {
                Field::Host
            }
            ErrorCode::WorkspaceUnavailable => Field::Workspace,
            ErrorCode::SandboxUnavailable => Field::Sandbox,
            ErrorCode::MaxTurns => Field::MaxTurns,
            _ => return None,
        })
    }
}

/// A refusal shown in the form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormError {
    /// The field it is shown under; `None` shows it above the keys.
    pub field: Option<Field>,
    pub code: String,
    pub message: String,
}

/// A field that picks one of a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub options: Vec<String>,
    pub index: usize,
}

impl Choice {
    pub fn new(options: Vec<String>, selected: &str) -> Self {
        let index = options.iter().position(|o| o == selected).unwrap_or(0);
        Choice { options, index }
    }

    pub fn value(&self) -> &str {
        self.options.get(self.index).map_or("", String::as_str)
    }

    fn step(&mut self, delta: isize) {
        if self.options.is_empty() {
            return;
        }
        let n = self.options.len() as isize;
        self.index = (self.index as isize + delta).rem_euclid(n) as usize;
    }
}

/// One catalog model the picker offers.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOption {
    pub provider: String,
    pub id: String,
    pub tier: String,
    /// `$3/$15 per Mtok`, `free`, `no price`.
    pub price: String,
    pub vision: bool,
}

impl ModelOption {
    /// Every visible model of `catalog`, in its order.
    pub fn of_catalog(catalog: &drover_core::money::Catalog) -> Vec<ModelOption> {
        catalog
            .all()
            .iter()
            .filter(|m| !m.hidden)
            .map(|m| ModelOption {
                provider: m.provider.clone(),
                id: m.id.clone(),
                tier: m.tier.as_str().to_string(),
                price: m.price.per_mtok_words(),
                vision: m.vision,
            })
            .collect()
    }
}

/// The model word that holds a run on a route card.
pub const AUTO_MODEL: &str = "auto";

/// The scenario choice meaning "the sim's default".
pub const DEFAULT_SCENARIO: &str = "(default)";
/// The workspace choice meaning "the configured default".
pub const DEFAULT_WORKSPACE: &str = "(default)";
/// The host choice meaning "this machine" (docs/ARCHITECTURE.md §"Hosts").
pub const THIS_MACHINE: &str = "(this machine)";
/// The sandbox choices: not asked (`[limits] sandbox_auto` may still put an `auto` run in
/// one), or asked (docs/ARCHITECTURE.md §"The sandbox").
pub const SANDBOX_CHOICES: [&str; 2] = ["off", "on"];

#[derive(Debug, Clone, PartialEq)]
pub struct DispatchForm {
    pub focus: Field,
    pub task: TextField,
    pub provider: Choice,
    pub model: TextField,
    pub policy: Choice,
    pub budget: TextField,
    pub cwd: TextField,
    /// This machine, then the configured hosts (shown only when there is one).
    pub host: Choice,
    pub workspace: Choice,
    pub sandbox: Choice,
    pub class: TextField,
    pub max_turns: TextField,
    pub tags: TextField,
    pub workflow: TextField,
    pub context: TextField,
    pub scenario: Choice,
    /// The run whose task this form dispatches again, and its turn limit.
    pub again: Option<(String, u32)>,
    pub error: Option<FormError>,
    pub sending: bool,
    /// The budget a blank budget field gets (`[limits] budget_usd_default`).
    pub budget_default: f64,
    /// The catalog's models, for the model picker (those of the chosen provider are
    /// offered).
    pub models: Vec<ModelOption>,
    /// Providers whose CLI is not found on this machine: marked as such when chosen.
    pub missing: Vec<String>,
}

impl DispatchForm {
    pub fn new(
        providers: &[String],
        default_provider: &str,
        cwd: &std::path::Path,
        scenarios: &[String],
    ) -> Self {
        let mut scenario_options = vec![DEFAULT_SCENARIO.to_string()];
        scenario_options.extend(scenarios.iter().cloned());
        DispatchForm {
            focus: Field::Task,
            task: TextField::default(),
            provider: Choice::new(providers.to_vec(), default_provider),
            model: TextField::default(),
            policy: Choice::new(
                drover_core::spec::PermissionPolicy::ALL
                    .iter()
                    .map(|p| p.as_str().to_string())
                    .collect(),
                drover_core::spec::PermissionPolicy::default().as_str(),
            ),
            budget: TextField::default(),
            cwd: TextField::new(cwd.display().to_string()),
            host: Choice::new(vec![THIS_MACHINE.to_string()], THIS_MACHINE),
            workspace: Choice::new(
                std::iter::once(DEFAULT_WORKSPACE)
                    .chain(drover_core::workspace::WorkspaceMode::ALL.map(|m| m.as_str()))
                    .map(str::to_string)
                    .collect(),
                DEFAULT_WORKSPACE,
            ),
            sandbox: Choice::new(
                SANDBOX_CHOICES.map(str::to_string).to_vec(),
                SANDBOX_CHOICES[0],
            ),
            class: TextField::default(),
            max_turns: TextField::default(),
            tags: TextField::default(),
            workflow: TextField::default(),
            context: TextField::default(),
            scenario: Choice::new(scenario_options, DEFAULT_SCENARIO),
            again: None,
            error: None,
            sending: false,
            budget_default: drover_core::config::Config::defaults()
                .limits
                .budget_usd_default,
            models: ModelOption::of_catalog(&drover_core::money::Catalog::embedded()),
            missing: Vec::new(),
        }
    }

    /// The same form, marking these providers as not installed.
    pub fn with_missing(mut self, missing: Vec<String>) -> Self {
        self.missing = missing;
        self
    }

    /// The same form, offering these hosts (`[hosts]`) besides this machine.
    pub fn with_hosts(mut self, hosts: &[String]) -> Self {
        let chosen = self.host.value().to_string();
        let options = std::iter::once(THIS_MACHINE.to_string())
            .chain(hosts.iter().cloned())
            .collect();
        self.host = Choice::new(options, &chosen);
        self
    }

    /// The same form, picking from these models.
    pub fn with_models(mut self, models: Vec<ModelOption>) -> Self {
        self.models = models;
        self
    }

    /// The models the picker offers: those the chosen provider runs.
    pub fn provider_models(&self) -> Vec<&ModelOption> {
        self.models
            .iter()
            .filter(|m| m.provider == self.provider.value())
            .collect()
    }

    /// The picker's choices in order: the provider's default (blank), `auto`, then the
    /// provider's models.
    pub fn model_choices(&self) -> Vec<String> {
        let mut choices = vec![String::new(), AUTO_MODEL.to_string()];
        choices.extend(self.provider_models().iter().map(|m| m.id.clone()));
        choices
    }

    /// ←/→ on the model field: the next (or previous) choice of the picker.
    fn step_model(&mut self, delta: isize) {
        let choices = self.model_choices();
        let typed = self.model.text.trim();
        let at = choices
            .iter()
            .position(|c| c.eq_ignore_ascii_case(typed))
            .map_or(if delta > 0 { -1 } else { 0 }, |i| i as isize);
        let n = choices.len() as isize;
        let next = (at + delta).rem_euclid(n) as usize;
        self.model = TextField::new(choices[next].clone());
    }

    /// The same form, with the budget a blank field gets.
    pub fn with_budget_default(mut self, budget_usd: f64) -> Self {
        self.budget_default = budget_usd;
        self
    }

    /// What a blank field means.
    pub fn placeholder(&self, field: Field) -> String {
        match field {
            Field::Budget => format!("default ({})", drover_core::money::usd(self.budget_default)),
            other => other.blank_words().to_string(),
        }
    }

    /// The form filled from a run's spec, to dispatch its task again: task, provider,
    /// model, policy, budget (as asked), directory, workspace and turn limit.
    pub fn again(
        providers: &[String],
        scenarios: &[String],
        hosts: &[String],
        run: &drover_core::dispatch::api::RunView,
    ) -> Self {
        let mut providers = providers.to_vec();
        if !providers.contains(&run.head.provider) {
            providers.push(run.head.provider.clone());
        }
        let mut form = DispatchForm::new(
            &providers,
            &run.head.provider,
            std::path::Path::new(&run.cwd),
            scenarios,
        );
        let mut hosts = hosts.to_vec();
        if let Some(host) = &run.head.host
            && !hosts.contains(host)
        {
            hosts.push(host.clone());
        }
        form = form.with_hosts(&hosts);
        if let Some(host) = &run.head.host {
            form.host = Choice::new(form.host.options.clone(), host);
        }
        form.task = TextField::new(run.task.clone());
        form.model = TextField::new(run.head.model.clone().unwrap_or_default());
        form.policy = Choice::new(form.policy.options.clone(), &run.policy);
        let asked = run.budget.clamped_from.unwrap_or(run.budget.cap);
        form.budget = TextField::new(format!("{asked:.2}"));
        if let Some(ws) = &run.workspace {
            form.workspace = Choice::new(form.workspace.options.clone(), ws.mode.as_str());
        }
        form.sandbox = Choice::new(
            form.sandbox.options.clone(),
            SANDBOX_CHOICES[usize::from(run.sandbox)],
        );
        form.max_turns = TextField::new(run.max_turns.to_string());
        form.again = Some((run.head.run_id.clone(), run.max_turns));
        form
    }

    /// The fields shown now (the scenario only for the simulated provider).
    pub fn fields(&self) -> Vec<Field> {
        let mut fields = vec![
            Field::Task,
            Field::Provider,
            Field::Model,
            Field::Policy,
            Field::Budget,
            Field::Cwd,
            Field::Host,
            Field::Workspace,
            Field::Sandbox,
            Field::Class,
            Field::MaxTurns,
            Field::Tags,
            Field::Workflow,
            Field::Context,
        ];
        if self.host.options.len() < 2 {
            fields.retain(|f| *f != Field::Host);
        }
        if self.provider.value() == drover_core::config::SIM_PROVIDER {
            fields.push(Field::Scenario);
        }
        fields
    }

    pub fn is_choice(field: Field) -> bool {
        matches!(
            field,
            Field::Provider
                | Field::Policy
                | Field::Host
                | Field::Workspace
                | Field::Sandbox
                | Field::Scenario
        )
    }

    pub fn text_of(&self, field: Field) -> String {
        match field {
            Field::Task => self.task.text.clone(),
            Field::Provider => self.provider.value().to_string(),
            Field::Model => self.model.text.clone(),
            Field::Policy => self.policy.value().to_string(),
            Field::Budget => self.budget.text.clone(),
            Field::Cwd => self.cwd.text.clone(),
            Field::Host => self.host.value().to_string(),
            Field::Workspace => self.workspace.value().to_string(),
            Field::Sandbox => self.sandbox.value().to_string(),
            Field::Class => self.class.text.clone(),
            Field::MaxTurns => self.max_turns.text.clone(),
            Field::Tags => self.tags.text.clone(),
            Field::Workflow => self.workflow.text.clone(),
            Field::Context => self.context.text.clone(),
            Field::Scenario => self.scenario.value().to_string(),
        }
    }

    fn text_field(&mut self, field: Field) -> Option<&mut TextField> {
        match field {
            Field::Task => Some(&mut self.task),
            Field::Model => Some(&mut self.model),
            Field::Budget => Some(&mut self.budget),
            Field::Cwd => Some(&mut self.cwd),
            Field::Class => Some(&mut self.class),
            Field::MaxTurns => Some(&mut self.max_turns),
            Field::Tags => Some(&mut self.tags),
            Field::Workflow => Some(&mut self.workflow),
            Field::Context => Some(&mut self.context),
            _ => None,
        }
    }

    fn choice(&mut self, field: Field) -> Option<&mut Choice> {
        match field {
            Field::Provider => Some(&mut self.provider),
            Field::Policy => Some(&mut self.policy),
            Field::Host => Some(&mut self.host),
            Field::Workspace => Some(&mut self.workspace),
            Field::Sandbox => Some(&mut self.sandbox),
            Field::Scenario => Some(&mut self.scenario),
            _ => None,
        }
    }

    fn move_focus(&mut self, delta: isize) {
        let fields = self.fields();
        let at = fields.iter().position(|f| *f == self.focus).unwrap_or(0) as isize;
        let n = fields.len() as isize;
        self.focus = fields[(at + delta).rem_euclid(n) as usize];
    }

    /// The spec the form describes, or a refusal of what cannot be sent as typed.
    pub fn spec(&self) -> Result<SpecInput, FormError> {
        let blank = |t: &str| {
            let t = t.trim();
            (!t.is_empty()).then(|| t.to_string())
        };
        let budget_usd = match blank(&self.budget.text) {
            None => None,
            Some(text) => Some(
                text.trim_start_matches('$')
                    .parse::<f64>()
                    .ok()
                    .filter(|b| b.is_finite())
                    .ok_or_else(|| FormError {
                        field: Some(Field::Budget),
                        code: ErrorCode::InvalidSpec.as_str().to_string(),
                        message: format!("{text:?} is not an amount of dollars; write e.g. 2.50"),
                    })?,
            ),
        };
        let max_turns = match blank(&self.max_turns.text) {
            None => None,
            Some(text) => Some(text.parse::<i64>().map_err(|_| FormError {
                field: Some(Field::MaxTurns),
                code: ErrorCode::InvalidSpec.as_str().to_string(),
                message: format!("{text:?} is not a number of turns; write e.g. 6"),
            })?),
        };
        let tags: Vec<String> = self
            .tags
            .text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        let provider = self.provider.value().to_string();
        let scenario = (provider == drover_core::config::SIM_PROVIDER
            && self.scenario.value() != DEFAULT_SCENARIO)
            .then(|| self.scenario.value().to_string());
        Ok(SpecInput {
            provider: blank(&provider),
            model: blank(&self.model.text),
            cwd: blank(&self.cwd.text).map(PathBuf::from),
            task: self.task.text.clone(),
            policy: blank(self.policy.value()),
            budget_usd,
            scenario,
            workspace: Some(self.workspace.value())
                .filter(|w| *w != DEFAULT_WORKSPACE)
                .map(str::to_string),
            sandbox: (self.sandbox.value() == SANDBOX_CHOICES[1]).then_some(true),
            host: Some(self.host.value())
                .filter(|h| *h != THIS_MACHINE)
                .map(str::to_string),
            max_turns,
            class: blank(&self.class.text),
            tags,
            workflow_id: blank(&self.workflow.text),
            context: blank(&self.context.text),
            ..SpecInput::default()
        })
    }

    fn submit(&mut self) -> Outcome {
        match self.spec() {
            Ok(spec) => {
                self.sending = true;
                self.error = None;
                Outcome::stay_with(ViewCommand::Request(
                    ReplyTag::Dispatch,
                    Request::Dispatch {
                        spec: Box::new(spec),
                    },
                ))
            }
            Err(e) => {
                if let Some(field) = e.field {
                    self.focus = field;
                }
                self.error = Some(e);
                Outcome::stay()
            }
        }
    }

    /// The dispatcher refused the spec: show why, next to its field.
    pub fn refused(&mut self, e: &DroverError) {
        self.sending = false;
        let field = Field::of_error(e.code);
        if let Some(field) = field
            && self.fields().contains(&field)
        {
            self.focus = field;
        }
        self.error = Some(FormError {
            field,
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
        });
    }
}

impl View for DispatchForm {
    fn context(&self) -> Context {
        Context::Form
    }

    fn handle_key(&mut self, action: Option<Action>, key: &KeyEvent) -> Outcome {
        if self.sending {
            return if action == Some(Action::Close) {
                Outcome::close()
            } else {
                Outcome::stay()
            };
        }
        match action {
            Some(Action::Close) => return Outcome::close(),
            Some(Action::Submit) => return self.submit(),
            Some(Action::NextField) => self.move_focus(1),
            Some(Action::PrevField) => self.move_focus(-1),
            Some(Action::ChoiceNext) if self.focus == Field::Model => self.step_model(1),
            Some(Action::ChoicePrev) if self.focus == Field::Model => self.step_model(-1),
            Some(Action::ChoiceNext) => {
                if let Some(choice) = self.choice(self.focus) {
                    choice.step(1);
                }
            }
            Some(Action::ChoicePrev) => {
                if let Some(choice) = self.choice(self.focus) {
                    choice.step(-1);
                }
            }
            _ => {
                let focus = self.focus;
                if let Some(field) = self.text_field(focus) {
                    field.edit(key);
                } else if key.code == crossterm::event::KeyCode::Char(' ')
                    && let Some(choice) = self.choice(focus)
                {
                    choice.step(1);
                }
            }
        }
        Outcome::stay()
    }

    fn draw(&self, buf: &mut Buffer, body: Rect, _context: &DrawContext<'_>) {
        let fields = self.fields();
        let outer_w = body.width.saturating_sub(4).min(90);
        // Inside: the border and a margin of one column on each side.
        let width = outer_w.saturating_sub(4) as usize;
        let mut lines: Vec<Line<'static>> = Vec::new();
        // Where the picker goes (under the focused model field), once the room is known.
        let mut picker_at = None;
        for field in &fields {
            let focused = self.focus == *field;
            let value = self.text_of(*field);
            let label_style = if focused {
                theme::focus()
            } else {
                theme::dim()
            };
            let mut spans = vec![
                Span::styled(if focused { "› " } else { "  " }, theme::focus()),
                Span::styled(format!("{:<10}", field.label()), label_style),
            ];
            let room = width.saturating_sub(16);
            if DispatchForm::is_choice(*field) {
                let missing = *field == Field::Provider && self.missing.contains(&value);
                spans.push(Span::styled("‹ ", theme::dim()));
                spans.push(Span::styled(
                    value,
                    if focused {
                        theme::focus()
                    } else {
                        theme::text()
                    },
                ));
                spans.push(Span::styled(" ›", theme::dim()));
                if missing {
                    spans.push(Span::styled(
                        "  not installed (drover doctor)",
                        theme::error(),
                    ));
                }
            } else if value.is_empty() {
                if focused {
                    spans.push(Span::styled("▏", theme::focus()));
                }
                spans.push(Span::styled(self.placeholder(*field), theme::dim()));
            } else {
                let field_text = TextField::new(value);
                spans.push(Span::raw(field_text.visible(room)));
                if focused {
                    spans.push(Span::styled("▏", theme::focus()));
                }
            }
            lines.push(Line::from(spans));
            if focused && *field == Field::Model {
                picker_at = Some(lines.len());
            }
            if let Some(e) = self.error.as_ref().filter(|e| e.field == Some(*field)) {
                // In full, wrapped under its field.
                for l in wrap(
                    &format!("{}: {}", e.code, e.message),
                    width.saturating_sub(12),
                ) {
                    lines.push(Line::from(vec![
                        Span::raw(" ".repeat(12)),
                        Span::styled(l, theme::error()),
                    ]));
                }
            }
        }
        lines.push(Line::raw(""));
        if let Some(e) = self.error.as_ref().filter(|e| e.field.is_none()) {
            for l in wrap(&format!("{}: {}", e.code, e.message), width) {
                lines.push(Line::styled(l, theme::error()));
            }
        }
        lines.push(if self.sending {
            Line::styled("dispatching…", theme::focus())
        } else {
            Line::styled(
                "←/→ change a choice or pick a model · blank fields take the defaults",
                theme::dim(),
            )
        });
        if let Some(at) = picker_at {
            let mut picker = model_picker(self, width);
            // Short of room: the marked line alone (the provider default when none is).
            let room = (body.height as usize).saturating_sub(lines.len() + 2);
            if picker.len() > room {
                let marked = picker
                    .iter()
                    .position(|l| l.spans.get(1).is_some_and(|s| s.content == "› "))
                    .unwrap_or(0);
                picker = vec![picker.swap_remove(marked)];
                picker.truncate(room);
            }
            lines.splice(at..at, picker);
        }
        let height = (lines.len() as u16 + 2).min(body.height);
        let area = centered(body, outer_w, height);
        let title = match &self.again {
            Some((run_id, _)) => format!("Dispatch again · the task of {run_id}"),
            None => "New dispatch".to_string(),
        };
        let inner = view_box(buf, area, title);
        for (y, line) in lines.iter().enumerate() {
            put_line(buf, inner, y as u16, line);
        }
    }
}

/// Models the picker lists under the model field, at most.
const PICKER_MAX: usize = 10;

/// The model picker, under the focused model field: the provider's default, `auto` (a
/// route card), then each catalog model the chosen provider runs with its tier, price
/// per million tokens and vision; the one in the field is marked.
fn model_picker(f: &DispatchForm, width: usize) -> Vec<Line<'static>> {
    let typed = f.model.text.trim().to_string();
    let pad = " ".repeat(12);
    let mark = |on: bool| {
        if on {
            Span::styled("› ", theme::focus())
        } else {
            Span::raw("  ")
        }
    };
    let style = |on: bool| if on { theme::focus() } else { theme::text() };
    let mut lines = vec![
        Line::from(vec![
            Span::raw(pad.clone()),
            mark(typed.is_empty()),
            Span::styled("provider default", style(typed.is_empty())),
        ]),
        Line::from(vec![
            Span::raw(pad.clone()),
            mark(typed.eq_ignore_ascii_case(AUTO_MODEL)),
            Span::styled(AUTO_MODEL, style(typed.eq_ignore_ascii_case(AUTO_MODEL))),
            Span::styled(" — routed: held on a route card to pick from", theme::dim()),
        ]),
    ];
    let models = f.provider_models();
    let id_w = models
        .iter()
        .map(|m| m.id.chars().count())
        .max()
        .unwrap_or(0);
    let tier_w = models.iter().map(|m| m.tier.len()).max().unwrap_or(0);
    for m in models.iter().take(PICKER_MAX) {
        let on = m.id.eq_ignore_ascii_case(&typed);
        let text = format!(
            "{:<id_w$}  {:<tier_w$}  {}{}",
            m.id,
            m.tier,
            m.price,
            if m.vision { "  vision" } else { "" }
        );
        lines.push(Line::from(vec![
            Span::raw(pad.clone()),
            mark(on),
            Span::styled(clip_width(&text, width.saturating_sub(14)), style(on)),
        ]));
    }
    if models.len() > PICKER_MAX {
        lines.push(Line::styled(
            format!(
                "{pad}  … {} more: `drover models`",
                models.len() - PICKER_MAX
            ),
            theme::dim(),
        ));
    }
    if models.is_empty() {
        lines.push(Line::styled(
            format!("{pad}  (the catalog lists no model for this provider)"),
            theme::dim(),
        ));
    }
    lines
}
