//! `numaplace train`: \[Bae12\] §5.2's models for `adaptive-mapping`,
//! fitted on simulator runs of the Fig. 4 benchmarks.

use anyhow::Result;
use numaplace_policy::adaptive::{Class, Mapping};
use numaplace_sim::Machine;
use numaplace_sim::adaptive::{Suite, fig4_suite, measure_pairs, train};

use numaplace::cli::TrainArgs;
use numaplace::error::InputError;

pub(crate) fn run(args: &TrainArgs) -> Result<()> {
    numaplace::files::check_output(&args.out, "--out")?;
    let machine = Machine::preset(&args.machine)
        .map_err(|e| InputError(format!("--machine {}: {e}", args.machine)))?;
    let suite: Option<Suite> = match args.suite.as_str() {
        "spec" => Some(Suite::Spec),
        "parsec" => Some(Suite::Parsec),
        "all" => None,
        other => {
            return Err(InputError(format!(
                "--suite {other:?}: give spec, parsec or all (Fig. 4's benchmarks to train on)"
            ))
            .into());
        }
    };
    if args.seeds == 0 {
        return Err(InputError("--seeds 0: give at least 1".into()).into());
    }
    let benches: Vec<_> = fig4_suite()
        .into_iter()
        .filter(|b| suite.is_none_or(|s| b.suite == s))
        .collect();
    let seeds: Vec<u64> = (0..args.seeds).collect();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pairs = measure_pairs(&machine, &benches, &seeds, workers);
    let names: Vec<&str> = benches.iter().map(|b| b.name).collect();
    let source = format!(
        "numaplace train: {} Fig. 4 benchmarks ({}) x {} seeds on {}, local and interleaved",
        benches.len(),
        names.join(", "),
        seeds.len(),
        machine.name
    );
    let models = train(&machine, &pairs, &source)
        .map_err(|e| InputError(format!("training failed: {e}")))?;
    println!(
        "{:<22} {:>6} {:>10} {:>10}",
        "benchmark", "seed", "inter/loc", "class"
    );
    for p in &pairs {
        let class = models.classifier.classify(&p.local.metrics, 8);
        println!(
            "{:<22} {:>6} {:>10.3} {:>10}",
            p.name,
            p.seed,
            p.ratio(),
            class.number()
        );
    }
    println!(
        "\n{:<8} {:<12} {:>6} {:>8}",
        "class", "measured in", "rows", "R²"
    );
    for c in Class::ALL {
        for m in [Mapping::Local, Mapping::Interleaved] {
            let f = models.performance(c, m).expect("trained");
            println!(
                "{:<8} {:<12} {:>6} {:>8.3}",
                c.number(),
                m.to_string(),
                f.rows,
                f.r2
            );
        }
    }
    let p = &models.power;
    println!(
        "\npower: {:.2} + {:.2} p + {:.2} l W (the {} preset's model)",
        p.idle_w, p.per_core_w, p.per_smt_w, machine.name
    );
    numaplace::files::write_atomically(&args.out, &models.to_json(), 0o600)?;
    println!("wrote {}", args.out.display());
    Ok(())
}
