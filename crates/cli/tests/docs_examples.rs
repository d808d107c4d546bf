//! Every `schedlab` command in a fenced `sh` block of README.md and docs/ works as written: its
//! arguments parse (the command runs with `SCHEDLAB_CHECK_ARGS` set, which stops after parsing),
//! every input file it names exists in the repository or is written by an earlier command of the
//! same page (an output option, a shell redirect, a file under an output directory), and it runs
//! and succeeds, in a scratch directory that mirrors the repository's top level, unless it needs
//! what a test cannot have (a VM, real threads on this machine's kernel, minutes of benchmarks or
//! sweeps: `NOT_RUN`) or reads what such a command writes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Options whose value a command writes, not reads.
const OUTPUT_OPTIONS: &[&str] = &["--json", "--trace", "-o", "--output", "--csv", "--html", "--out"];

/// Subcommands checked but not run here: the VM (`vm-test`), real runs on this machine (`exec`,
/// `calibrate`, `validate`), and the long ones (`bench`, `sweep`, `reproduce`); each has its own
/// tests (docs/testing.md).
const NOT_RUN: &[&str] = &["vm-test", "exec", "calibrate", "validate", "bench", "sweep", "reproduce"];

/// Extensions of the files an example may read.
const INPUT_EXTENSIONS: &[&str] = &[".toml", ".json", ".txt", ".csv", ".dat"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// README.md and every Markdown file under docs/, sorted.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The lines of the page's fenced `sh`/`bash`/`shell` blocks, `\`-continuations joined, with the
/// line number each starts on.
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            in_block = !in_block && matches!(info.trim(), "sh" | "bash" | "shell");
            pending = None;
            continue;
        }
        if !in_block {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        if let Some(head) = line.trim_end().strip_suffix('\\') {
            joined.push_str(head);
            joined.push(' ');
            pending = Some((start, joined));
        } else {
            joined.push_str(line);
            out.push((start, joined));
        }
    }
    out
}

/// Shell words up to a comment: (word, whether any of it was quoted). Enough of sh for the docs'
/// examples.
fn words(line: &str) -> Result<Vec<(String, bool)>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (None::<char>, false);
    let mut started = false;
    for c in line.chars() {
        match quoted {
            Some(q) if c == q => quoted = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quoted = Some(c);
                any = true;
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    out.push((std::mem::take(&mut cur), any));
                }
                (any, started) = (false, false);
            }
            None if c == '#' && !started => break, // a comment to the end of the line
            None => {
                cur.push(c);
                started = true;
            }
        }
    }
    if quoted.is_some() {
        return Err(format!("unclosed quote in `{line}`"));
    }
    if started {
        out.push((cur, any));
    }
    Ok(out)
}

/// One `schedlab` command found in a shell line: its arguments, and where the line redirects
/// output to (a file the rest of the page may read).
struct Example {
    args: Vec<String>,
    redirects: Vec<String>,
}

fn example(line: &str) -> Result<Option<Example>, String> {
    let line = line.trim().strip_prefix("$ ").unwrap_or(line.trim());
    if !line.contains("schedlab") {
        return Ok(None);
    }
    let ws = words(line)?;
    let Some(at) =
        ws.iter().position(|(w, q)| !q && Path::new(w).file_name().is_some_and(|n| n == "schedlab"))
    else {
        return Ok(None);
    };
    // It is the command only after environment assignments and wrappers (`echo schedlab` is not).
    let wrapper = |w: &str| {
        matches!(w, "sudo" | "time" | "env")
            || w.split_once('=').is_some_and(|(k, _)| !k.is_empty() && !k.contains('/'))
    };
    if !ws[..at].iter().all(|(w, _)| wrapper(w)) {
        return Ok(None);
    }
    let mut args = Vec::new();
    let mut redirects = Vec::new();
    let mut rest = ws[at + 1..].iter();
    while let Some((w, q)) = rest.next() {
        if *q {
            args.push(w.clone());
            continue;
        }
        if w.starts_with('#') || matches!(w.as_str(), "|" | "||" | "&&" | ";" | "&") {
            break;
        }
        if let Some(target) = w.strip_prefix("2>").or_else(|| w.strip_prefix('>')) {
            let target = target.trim_start_matches('>');
            match target {
                "" => redirects.extend(rest.next().map(|(t, _)| t.clone())),
                t => redirects.push(t.to_string()),
            }
            continue;
        }
        args.push(w.clone());
    }
    Ok(Some(Example { args, redirects }))
}

/// The input files `args` names: values ending in an input extension (also after `key=`), not the
/// values of output options.
fn inputs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && OUTPUT_OPTIONS.contains(&args[i - 1].as_str()) {
            continue;
        }
        let value = a.rsplit_once('=').map_or(a.as_str(), |(_, v)| v);
        if INPUT_EXTENSIONS.iter().any(|x| value.ends_with(x)) && !value.starts_with(['~', '$', '<']) {
            out.push(value.to_string());
        }
    }
    out
}

fn outputs(args: &[String]) -> Vec<String> {
    args.windows(2).filter(|w| OUTPUT_OPTIONS.contains(&w[0].as_str())).map(|w| w[1].clone()).collect()
}

/// Runs the command in `dir` (only parsing its arguments if `parse_only`); Err: its error line.
fn schedlab_in(dir: &Path, args: &[String], parse_only: bool) -> Result<(), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    cmd.args(args).current_dir(dir);
    if parse_only {
        cmd.env("SCHEDLAB_CHECK_ARGS", "1");
    }
    let out = cmd.output().unwrap();
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let line =
        err.lines().find(|l| l.starts_with("error")).or_else(|| err.lines().rfind(|l| !l.trim().is_empty()));
    Err(line.unwrap_or("failed").to_string())
}

/// A fresh directory holding a symbolic link to each top-level entry of the repository (but
/// `target`), where the examples write their outputs.
fn scratch_mirror(root: &Path) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("schedlab-docs-examples-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), dir.join(&name)).unwrap();
    }
    dir
}

#[test]
fn every_documented_command_parses_names_files_that_exist_and_runs() {
    let root = repo_root();
    let scratch = scratch_mirror(&root);
    let mut failures = Vec::new();
    let (mut checked, mut ran) = (0, 0);
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        // Files and directories the page's earlier commands write, and those of them written by a
        // command not run here.
        let mut made: HashSet<String> = HashSet::new();
        let mut not_made: HashSet<String> = HashSet::new();
        for (line_no, line) in shell_lines(&text) {
            let ex = match example(&line) {
                Ok(Some(ex)) => ex,
                Ok(None) => continue,
                Err(e) => {
                    failures.push(format!("{name}:{line_no}: {e}"));
                    continue;
                }
            };
            checked += 1;
            let command = format!("{name}:{line_no}: `schedlab {}`", ex.args.join(" "));
            let parsed = schedlab_in(&root, &ex.args, true);
            if let Err(e) = &parsed {
                failures.push(format!("{command}: {e}"));
            }
            let under = |set: &HashSet<String>, file: &str| {
                set.contains(file)
                    || set.iter().any(|d| {
                        file.strip_prefix(d.trim_end_matches('/')).is_some_and(|r| r.starts_with('/'))
                    })
            };
            let files = inputs(&ex.args);
            for file in &files {
                if !under(&made, file) && !root.join(file).exists() {
                    failures.push(format!(
                        "{command} reads {file}, which neither the repository nor an earlier command on the page has"
                    ));
                }
            }
            let skipped = ex.args.first().is_some_and(|c| NOT_RUN.contains(&c.as_str()))
                || files.iter().any(|f| under(&not_made, f));
            if skipped {
                not_made.extend(outputs(&ex.args));
                not_made.extend(ex.redirects.iter().cloned());
            } else if parsed.is_ok() {
                ran += 1;
                if let Err(e) = schedlab_in(&scratch, &ex.args, false) {
                    failures.push(format!("{command} fails when run: {e}"));
                }
            }
            made.extend(outputs(&ex.args));
            made.extend(ex.redirects);
        }
    }
    std::fs::remove_dir_all(&scratch).ok();
    assert!(checked >= 30, "only {checked} documented commands found: the extraction broke");
    assert!(ran >= 15, "only {ran} documented commands were run");
    assert!(failures.is_empty(), "{} documented commands fail:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_extraction_reads_continuations_quotes_comments_and_redirects() {
    let text = "text\n```sh\nschedlab run --policy 'cfs[a=1]' \\\n   --json a.json   # note\n$ target/release/schedlab report a.json > r.txt\necho schedlab\n```\n```toml\nschedlab = 1\n```\n";
    let lines = shell_lines(text);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].0, 3, "a joined line keeps its first line's number");
    let first = example(&lines[0].1).unwrap().unwrap();
    assert_eq!(first.args, ["run", "--policy", "cfs[a=1]", "--json", "a.json"]);
    assert_eq!(outputs(&first.args), ["a.json"]);
    assert!(inputs(&first.args).is_empty(), "an output option's value is not an input");
    let second = example(&lines[1].1).unwrap().unwrap();
    assert_eq!(
        (second.args.as_slice(), second.redirects.as_slice()),
        (&["report".to_string(), "a.json".into()][..], &["r.txt".to_string()][..])
    );
    assert_eq!(inputs(&second.args), ["a.json"]);
    assert!(example(&lines[2].1).unwrap().is_none(), "`echo schedlab` is not the command");
    assert_eq!(example("SCHEDLAB_X=1 schedlab list").unwrap().unwrap().args, ["list"]);
    assert!(example("schedlab run 'open").is_err());
    assert_eq!(example("schedlab list # what's there").unwrap().unwrap().args, ["list"], "a comment ends it");
    assert_eq!(inputs(&["--workload".into(), "w.toml".into(), "grid=g.toml".into()]), ["w.toml", "g.toml"]);
}
