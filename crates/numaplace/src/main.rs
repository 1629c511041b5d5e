//! The numaplace binary: parses the command line, sets up logging and
//! hands each subcommand to its module (commands/), which does its work
//! with numaplace's library (lib.rs).

mod commands;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use numaplace::cli::{self, Cli, Command};
use numaplace::output;

fn main() -> ExitCode {
    output::stdout_errors_exit_1();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `exec`'s own refusals exit 125, apart from its command's
            // statuses (commands/exec); other commands' usage errors 2.
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            if e.use_stderr() && commands::exec::is_exec(&args) {
                let _ = e.print();
                return ExitCode::from(commands::exec::FAILED);
            }
            e.exit()
        }
    };
    let exec = matches!(cli.command, Command::Exec(_));
    // The daemon says at its default level what it runs and what it was
    // told (its start line, a reload); the commands a person types, only
    // what went wrong.
    let quiet = if matches!(cli.command, Command::Run(_)) {
        "info"
    } else {
        "warn"
    };
    init_logging(cli.verbose, quiet, cli.log_format);
    if !matches!(cli.command, Command::Run(_) | Command::Top(_)) {
        // A command whose output is cut short (`numaplace scenarios | head`)
        // ends as any Unix filter does, by SIGPIPE, instead of panicking on
        // the failed write. Not the daemon: it writes to metrics clients
        // over UNIX sockets, where a client that hangs up must cost it
        // nothing (Rust's runtime leaves SIGPIPE ignored for that).
        numaplace_linux::probe::default_sigpipe();
    }
    let result = match cli.command {
        Command::Topology(args) => commands::topology::run(&args),
        Command::Tasks(args) => commands::tasks::run(&args),
        Command::Guest(args) => commands::guest::run(&args),
        Command::Doctor(args) => match commands::doctor::run(&args) {
            // Not ready for the configured policy: the report said why.
            Ok(status @ 1..) => return ExitCode::from(status),
            other => other.map(|_| ()),
        },
        Command::Record(args) => commands::record::record(&args),
        Command::Replay(args) => commands::record::replay(&args),
        Command::Run(args) => numaplace::daemon::run(&args),
        Command::Config(args) => commands::show_config::run(&args),
        Command::Exec(args) => commands::exec::run(&args),
        Command::Advise(args) => commands::advise::run(&args),
        Command::Top(args) => commands::top::run(&args),
        Command::Simulate(args) => commands::simulate::simulate(&args),
        Command::Compare(args) => match args.random {
            Some(n) => commands::sweep::sweep_cmd(&args, n),
            None => commands::simulate::compare_cmd(&args),
        },
        Command::Merge(args) => commands::sweep::merge_cmd(&args),
        Command::Scenarios => commands::simulate::scenarios(),
        Command::Generate(args) => commands::simulate::generate(&args),
        Command::Bench(args) => commands::bench::run(&args),
        Command::Calibrate(args) => commands::calibrate::run(&args),
        Command::Train(args) => commands::train::run(&args),
        Command::Completions(args) => commands::manual::completions(&args),
        Command::Manpages(args) => commands::manual::manpages(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            numaplace::output::say!("numaplace: error: {e:#}");
            ExitCode::from(if exec {
                commands::exec::exit_code(&e)
            } else {
                numaplace::error::exit_code(&e)
            })
        }
    }
}

fn init_logging(verbose: u8, quiet: &str, format: cli::LogFormat) {
    let default = match verbose {
        0 => quiet,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| output::QuietStderr)
        .with_target(false);
    match format {
        // One object a line, its time in it (a shipper's parser wants one
        // whatever the transport adds).
        cli::LogFormat::Json => fmt.json().flatten_event(true).init(),
        cli::LogFormat::Text => fmt
            // Colour only for a person at a terminal, never into a file, a
            // pipe or journald.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .without_time()
            .init(),
    }
}
