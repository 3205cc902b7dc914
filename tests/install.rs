//! `<bin> install <host>` run as a user runs it: the example server's binary, with a temporary
//! `HOME` and `XDG_CONFIG_HOME`, writes each host's file with its own absolute path and `mcp`,
//! and `--dry-run` prints the change without writing.

#[path = "harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

struct Home(PathBuf);

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn install(binary: &str, home: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(binary)
        .arg("install")
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .env_remove("APPDATA")
        .current_dir(home)
        .output()
        .expect("the binary runs");
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_binary_installs_itself_in_each_hosts_file() {
    let binary = harness::example_binary();
    let absolute = std::fs::canonicalize(&binary)
        .unwrap()
        .display()
        .to_string();
    let home = Home(std::env::temp_dir().join(format!("oxp-install-e2e-{}", std::process::id())));
    std::fs::create_dir_all(&home.0).unwrap();
    let home_dir = home.0.clone();

    // --dry-run: the change on stdout, no file.
    let (code, stdout, stderr) = install(&binary, &home_dir, &["claude-code", "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("+     \"command\": "), "{stdout}");
    assert!(stdout.contains(&format!("{absolute:?}")), "{stdout}");
    assert!(!home_dir.join(".claude.json").exists());

    let stdio = |typed: bool| {
        let mut entry = json!({"command": absolute, "args": ["mcp"]});
        if typed {
            entry["type"] = json!("stdio");
        }
        entry
    };
    for (host, file, key, typed) in [
        (
            "claude-desktop",
            "xdg/Claude/claude_desktop_config.json",
            "mcpServers",
            false,
        ),
        ("claude-code", ".claude.json", "mcpServers", true),
        ("cursor", ".cursor/mcp.json", "mcpServers", false),
        ("vscode", "xdg/Code/User/mcp.json", "servers", true),
    ] {
        let (code, stdout, stderr) = install(&binary, &home_dir, &[host]);
        assert_eq!(code, 0, "{host}: {stderr}");
        assert!(stdout.contains("added `calculator`"), "{stdout}");
        let written = read(&home_dir.join(file));
        assert_eq!(
            written,
            json!({ key: {"calculator": stdio(typed)} }),
            "{host}"
        );
        // Again with another entry under the name: refused, exit 1, the file as it was.
        let (code, _, stderr) = install(&binary, &home_dir, &[host, "--env", "OXP_TOOLS=x"]);
        assert_eq!(code, 1, "{host}");
        assert!(stderr.contains("--force"), "{stderr}");
        assert_eq!(read(&home_dir.join(file)), written);
    }
    // A usage error names install's options.
    let (code, _, stderr) = install(&binary, &home_dir, &["zed"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown host `zed`") && stderr.contains("--dry-run"),
        "{stderr}"
    );
}
