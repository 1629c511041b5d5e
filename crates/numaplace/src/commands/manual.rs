//! `numaplace completions` and `numaplace manpages`: the shell completion
//! scripts and the man pages, generated from the command line's own
//! definition (clap_complete, clap_mangen), so they never disagree with it.

use anyhow::{Context as _, Result};
use clap::CommandFactory as _;

use numaplace::cli::{Cli, CompletionsArgs, ManpagesArgs};
use numaplace::error::InputError;
use numaplace::files::write_atomically;

/// Prints the completion script for `args.shell` on standard output.
pub(crate) fn completions(args: &CompletionsArgs) -> Result<()> {
    use std::io::Write as _;
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics on a failed write, and a
    // reader that stops early (`| head`) is no failure of ours.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "numaplace", &mut script);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("writing the completion script")
        }
        _ => Ok(()),
    }
}

/// Writes `numaplace.1` and one `numaplace-COMMAND.1` per visible command
/// into `args.dir`, each replaced atomically (mode 0644).
pub(crate) fn manpages(args: &ManpagesArgs) -> Result<()> {
    let dir = &args.dir;
    if dir.exists() && !dir.is_dir() {
        return Err(InputError(format!("{}: not a directory", dir.display())).into());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cmd = Cli::command();
    for (name, page) in pages(&cmd)? {
        write_atomically(&dir.join(format!("{name}.1")), &page, 0o644)?;
        println!("{}", dir.join(format!("{name}.1")).display());
    }
    Ok(())
}

/// The man pages as (name, roff text): the top-level page, whose
/// SUBCOMMANDS section names every command's page, then one per visible
/// command, its synopsis spelled as typed (`numaplace run ...`).
fn pages(cmd: &clap::Command) -> Result<Vec<(String, String)>> {
    let render = |c: clap::Command| -> Result<String> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(c)
            .render(&mut buf)
            .context("rendering a man page")?;
        String::from_utf8(buf).context("man page is not UTF-8")
    };
    let mut out = vec![("numaplace".to_string(), render(cmd.clone())?)];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("numaplace-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("numaplace {}", sub.get_name()))
            .version(numaplace::cli::VERSION);
        out.push((name, render(page)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_page_per_visible_command_and_none_for_hidden_ones() {
        let cmd = Cli::command();
        let pages = pages(&cmd).unwrap();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[0], "numaplace");
        for want in [
            "numaplace-run",
            "numaplace-compare",
            "numaplace-completions",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(!names.contains(&"numaplace-manpages"), "{names:?}");
        let (_, top) = &pages[0];
        assert!(top.starts_with(".ie"), "roff: {}", &top[..40]);
        assert!(
            top.contains("numaplace\\-run(1)"),
            "the commands' pages are named"
        );
        let (_, run) = pages.iter().find(|(n, _)| n == "numaplace-run").unwrap();
        assert!(run.contains("numaplace run"), "synopsis as typed");
        assert!(
            run.contains("\\-\\-dry\\-run"),
            "run's page documents its flags"
        );
    }
}
