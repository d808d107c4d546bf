//! docs/errors.md is a tested catalogue: every `console` example in it runs, in a scratch directory
//! holding the files the page shows, and must fail with exactly the one line the page shows.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One example: the command's arguments and the expected stderr line.
struct Example {
    heading: String,
    args: Vec<String>,
    expect: String,
}

/// The page's files (name, content) and examples.
fn parse(doc: &str) -> (Vec<(String, String)>, Vec<Example>) {
    let (mut files, mut examples) = (Vec::new(), Vec::new());
    let mut heading = String::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if let Some(h) = line.strip_prefix("### ") {
            heading = h.to_string();
        } else if let Some(info) = line.strip_prefix("```") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            let words: Vec<&str> = info.split_whitespace().collect();
            if words.first() == Some(&"console") {
                assert_eq!(body.len(), 2, "{heading}: a console example is a command and one line");
                let cmd = body[0].strip_prefix("$ schedlab ").expect("command starts with `$ schedlab `");
                examples.push(Example {
                    heading: heading.clone(),
                    args: cmd.split_whitespace().map(String::from).collect(),
                    expect: body[1].to_string(),
                });
            } else if let Some(name) = words.iter().find_map(|w| w.strip_prefix("file=")) {
                let mut text = body.join("\n");
                if !words.contains(&"nonl") {
                    text.push('\n');
                }
                files.push((name.to_string(), text));
            }
        }
    }
    (files, examples)
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-errors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn every_error_in_the_catalogue_is_the_one_the_binary_prints() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/errors.md"))
        .expect("docs/errors.md");
    let (files, examples) = parse(&doc);
    assert!(examples.len() >= 30, "only {} examples found: is the page's format intact?", examples.len());
    let dir = scratch();
    for (name, text) in &files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let mut wrong = Vec::new();
    for ex in &examples {
        let out =
            Command::new(env!("CARGO_BIN_EXE_schedlab")).args(&ex.args).current_dir(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(1) || err.trim_end() != ex.expect {
            wrong.push(format!(
                "{}: `schedlab {}` exited {:?} with\n  {}\nthe page says\n  {}",
                ex.heading,
                ex.args.join(" "),
                out.status.code(),
                err.trim_end(),
                ex.expect
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "docs/errors.md is out of date:\n{}", wrong.join("\n"));
}

#[test]
fn the_parser_finds_files_and_examples() {
    let doc =
        "### A\n```toml file=a.toml nonl\nx = 1\n```\n```console\n$ schedlab run --x a.toml\nerror: e\n```\n";
    let (files, examples) = parse(doc);
    assert_eq!(files, vec![("a.toml".to_string(), "x = 1".to_string())]);
    assert_eq!(examples.len(), 1);
    assert_eq!(examples[0].args, ["run", "--x", "a.toml"]);
    assert_eq!(examples[0].expect, "error: e");
}
