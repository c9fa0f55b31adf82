//! `drover models [--provider P] [--json]`: the catalog — every model a provider can run,
//! with its tier, price per million tokens (input/output), vision and whether it is the
//! provider's default. Reads the config (its `[[catalog.models]]` over the embedded
//! catalog); needs no running drover.

use clap::Args;
use serde::Serialize;

use super::output::{JsonFlag, print_json, write_stdout};
use drover_core::config::Config;
use drover_core::error::{DroverError, ErrorCode};
use drover_core::money::catalog::{Catalog, Model};
use drover_core::paths::Paths;

#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// Only the models this provider runs.
    #[arg(long, value_name = "PROVIDER")]
    pub provider: Option<String>,
    #[command(flatten)]
    pub output: JsonFlag,
}

/// One model as `--json` prints it.
#[derive(Debug, Serialize)]
struct ModelRow<'a> {
    provider: &'a str,
    id: &'a str,
    aliases: &'a [String],
    tier: &'static str,
    /// Dollars per million input / output tokens (`null` when free or unpriced).
    input_per_mtok: Option<f64>,
    output_per_mtok: Option<f64>,
    free: bool,
    vision: bool,
    default: bool,
    context_window: Option<u64>,
}

pub fn run(args: ModelsArgs, paths: &Paths) -> Result<(), DroverError> {
    let config = Config::load(&paths.config_file)?;
    let catalog = Catalog::from_config(&config)?;
    let models = listed(&catalog, args.provider.as_deref())?;
    if args.output.json {
        let rows: Vec<ModelRow> = models.iter().map(|m| row(m)).collect();
        return print_json(&rows);
    }
    write_stdout(&table(&models))
}

/// The catalog's visible models, of one provider when one is named (an unknown one is
/// refused, naming those there are).
pub fn listed<'c>(
    catalog: &'c Catalog,
    provider: Option<&str>,
) -> Result<Vec<&'c Model>, DroverError> {
    if let Some(p) = provider
        && !catalog.providers().contains(&p)
    {
        return Err(DroverError::new(
            ErrorCode::InvalidProvider,
            format!(
                "the catalog has no model of provider {p:?}; name one of {}",
                catalog.providers().join(", ")
            ),
        ));
    }
    Ok(catalog
        .all()
        .iter()
        .filter(|m| !m.hidden && provider.is_none_or(|p| m.provider == p))
        .collect())
}

fn row(m: &Model) -> ModelRow<'_> {
    let (input, output) = m.price.per_mtok();
    ModelRow {
        provider: &m.provider,
        id: &m.id,
        aliases: &m.aliases,
        tier: m.tier.as_str(),
        input_per_mtok: input,
        output_per_mtok: output,
        free: m.price == drover_core::money::pricing::Price::Free,
        vision: m.vision,
        default: m.default,
        context_window: m.context_window,
    }
}

/// `provider  model  tier  $in/$out per Mtok  vision  default`, aligned.
fn table(models: &[&Model]) -> String {
    let cells: Vec<[String; 5]> = models
        .iter()
        .map(|m| {
            [
                m.provider.clone(),
                m.id.clone(),
                m.tier.as_str().to_string(),
                m.price.per_mtok_words(),
                [m.vision.then_some("vision"), m.default.then_some("default")]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    let mut out = String::new();
    for c in &cells {
        let line = format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_listed_per_provider_and_an_unknown_one_is_refused() {
        let catalog = Catalog::embedded();
        let sim = listed(&catalog, Some("sim")).unwrap();
        assert!(!sim.is_empty());
        assert!(sim.iter().all(|m| m.provider == "sim"));
        let all = listed(&catalog, None).unwrap();
        assert!(all.len() > sim.len());
        assert!(all.iter().all(|m| !m.hidden));
        let e = listed(&catalog, Some("nope")).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidProvider);
        assert!(e.message.contains("sim"), "{}", e.message);
        let text = table(&sim);
        assert!(
            text.lines()
                .any(|l| l.starts_with("sim") && l.contains("per Mtok")),
            "{text}"
        );
    }
}
