//! `r`: the selected run's task dispatched again — the dispatch form filled from its
//! spec (task, provider, model, policy, budget, directory, workspace), sent with `enter`.
//!
//! What must stay true: the form is filled from the run's own view as the dispatcher
//! gave it, never guessed; a run whose view is not here yet is fetched first, and the
//! user is told to press again.

use super::App;
use crate::views::form::DispatchForm;
use drover_core::dispatch::api::RunSummary;

impl App {
    pub(super) fn redispatch(&mut self, selected: Option<&RunSummary>) {
        let Some(run) = selected else {
            return self.flash_error("select a run first".into());
        };
        let id = &run.head.run_id;
        let view = self.model.run(id).and_then(|e| e.detail.as_ref());
        let Some(view) = view else {
            self.want_show.push(id.clone());
            return self.flash_info(format!("loading {id}'s spec; press again in a moment"));
        };
        let form = DispatchForm::again(
            &self.options.providers,
            &self.options.scenarios,
            &self.options.hosts,
            view,
        )
        .with_budget_default(self.options.default_budget_usd)
        .with_models(self.options.models.clone())
        .with_missing(self.options.missing_providers.clone());
        self.flash_info(format!("{id}'s task, filled in: enter dispatches it again"));
        self.views.push(form);
    }
}
