//! `<bin> install <host>`: this server written into an MCP host's own configuration file, as
//! FastMCP's `install` does. The file is merged into (every other server and key kept), backed
//! up first, written whole or not at all, and an entry of the same name is replaced only with
//! `--force`. Where each host reads its servers, and in what shape:
//!
//! - Claude Desktop: `claude_desktop_config.json` in `~/Library/Application Support/Claude`
//!   (macOS), `%APPDATA%\Claude` (Windows), `$XDG_CONFIG_HOME/Claude` (Linux builds);
//!   `mcpServers.<name> = {command, args, env}`; stdio only, remote servers are added in its
//!   Settings → Connectors (modelcontextprotocol.io "Connect to local MCP servers").
//! - Claude Code: `~/.claude.json` (user scope) or `.mcp.json` at the project root (`--project`);
//!   `mcpServers.<name> = {type: "stdio", command, args, env}` or `{type: "http", url, headers}`
//!   (code.claude.com/docs/en/mcp).
//! - Cursor: `~/.cursor/mcp.json` or `.cursor/mcp.json` (`--project`); `mcpServers.<name> =
//!   {command, args, env}` or `{url, headers}` (cursor.com/docs/mcp).
//! - VS Code: `mcp.json` of the user profile (`~/Library/Application Support/Code/User`,
//!   `%APPDATA%\Code\User`, `$XDG_CONFIG_HOME/Code/User`) or `.vscode/mcp.json` (`--project`);
//!   `servers.<name> = {type: "stdio", command, args, env}` or `{type: "http", url, headers}`
//!   (code.visualstudio.com/docs/copilot/reference/mcp-configuration).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

pub(crate) const USAGE: &str = "\
usage: <bin> install <host> [--name NAME] [--project] [--env K=V]... [--force] [--dry-run]
       <bin> install <host> --url URL [--header K=V]... [--name NAME] [--project] [--force] [--dry-run]
hosts: claude-desktop, claude-code, cursor, vscode
  writes this server into the host's MCP configuration: this binary's absolute path and `mcp`
  (stdio), or with --url its streamable HTTP endpoint and headers. Keeps a backup of the file,
  keeps the host's other servers, replaces an entry of the same name only with --force;
  --dry-run prints the change and writes nothing; --project writes the project's file (in the
  current directory) instead of the user's.";

/// Prints `message` (if any) and `install`'s usage; returns exit code 2.
pub(crate) fn usage_error(message: &str) -> i32 {
    if !message.is_empty() {
        eprintln!("error: {message}");
    }
    eprintln!("{}", USAGE.replace("<bin>", &super::commands::program()));
    2
}

/// An MCP host with a configuration file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Host {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    VsCode,
}

impl Host {
    fn parse(name: &str) -> Result<Host, String> {
        match name {
            "claude-desktop" | "claude_desktop" => Ok(Host::ClaudeDesktop),
            "claude-code" | "claude_code" | "claude" => Ok(Host::ClaudeCode),
            "cursor" => Ok(Host::Cursor),
            "vscode" | "vs-code" | "code" => Ok(Host::VsCode),
            other => Err(format!(
                "unknown host `{other}`, expected one of claude-desktop, claude-code, cursor, vscode"
            )),
        }
    }

    fn title(self) -> &'static str {
        match self {
            Host::ClaudeDesktop => "Claude Desktop",
            Host::ClaudeCode => "Claude Code",
            Host::Cursor => "Cursor",
            Host::VsCode => "VS Code",
        }
    }

    /// The key of the file's object of servers.
    fn key(self) -> &'static str {
        match self {
            Host::VsCode => "servers",
            _ => "mcpServers",
        }
    }
}

/// How the host reaches the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// This binary, run with `mcp`, with these environment variables.
    Stdio { env: Vec<(String, String)> },
    /// The streamable HTTP endpoint, with these headers.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// `install`'s command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Install {
    pub host: Host,
    pub name: Option<String>,
    pub transport: Transport,
    pub project: bool,
    pub force: bool,
    pub dry_run: bool,
}

fn pair(flag: &str, text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .or_else(|| {
            if flag == "--header" {
                text.split_once(':')
            } else {
                None
            }
        })
        .ok_or_else(|| format!("`{flag} {text}`: expected K=V"))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("`{flag} {text}`: the name is empty"));
    }
    Ok((key.to_owned(), value.trim().to_owned()))
}

/// Parses the arguments after `install`.
pub(crate) fn parse(args: &[String]) -> Result<Install, String> {
    let mut args = args.iter();
    let host = match args.next().map(String::as_str) {
        None => {
            return Err(
                "`install` needs a host: claude-desktop, claude-code, cursor or vscode".into(),
            );
        }
        Some("--help" | "-h") => return Err(String::new()),
        Some(host) => Host::parse(host)?,
    };
    let (mut name, mut url, mut headers, mut env) = (None, None, Vec::new(), Vec::new());
    let (mut project, mut force, mut dry_run) = (false, false, false);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next().cloned())
                .ok_or_else(|| format!("`{flag}` needs a value"))
        };
        match flag {
            "--name" => name = Some(value()?),
            "--url" => url = Some(value()?),
            "--header" => headers.push(pair(flag, &value()?)?),
            "--env" => env.push(pair(flag, &value()?)?),
            "--project" => project = true,
            "--force" => force = true,
            "--dry-run" => dry_run = true,
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unexpected argument `{other}` to `install`")),
        }
    }
    if let Some(name) = &name {
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err(format!(
                "`--name {name:?}`: a server name is a non-empty line of text"
            ));
        }
    }
    let transport = match url {
        Some(url) => {
            if !env.is_empty() {
                return Err(
                    "`--env` is for the stdio command; a server at `--url` has its own".into(),
                );
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "`--url {url}`: expected an http:// or https:// URL"
                ));
            }
            if host == Host::ClaudeDesktop {
                return Err(
                    "Claude Desktop's configuration file takes stdio servers only: add a remote \
                     server in its Settings → Connectors, or install the stdio command (no --url)"
                        .into(),
                );
            }
            Transport::Http {
                url: endpoint(&url),
                headers,
            }
        }
        None if !headers.is_empty() => return Err("`--header` goes with `--url`".into()),
        None => Transport::Stdio { env },
    };
    if project && host == Host::ClaudeDesktop {
        return Err("Claude Desktop has no project configuration: drop --project".into());
    }
    Ok(Install {
        host,
        name,
        transport,
        project,
        force,
        dry_run,
    })
}

/// The MCP endpoint of `url`: as given, or `/mcp` of a bare origin (where oxp serves it).
fn endpoint(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    match after_scheme.find('/') {
        None => format!("{url}/mcp"),
        Some(at) if after_scheme[at..] == *"/" => format!("{}mcp", url),
        Some(_) => url.to_owned(),
    }
}

/// Where files are: the environment, read once by the caller (tests give a temporary home).
#[derive(Clone, Debug, Default)]
pub(crate) struct Places {
    pub home: Option<PathBuf>,
    /// `%APPDATA%` (Windows).
    pub appdata: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (Linux; `~/.config` when unset).
    pub xdg_config: Option<PathBuf>,
    /// The project (the current directory) for `--project`.
    pub cwd: PathBuf,
    /// This binary, absolute.
    pub exe: PathBuf,
}

impl Places {
    pub fn from_env() -> Result<Places, String> {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let exe = std::env::current_exe()
            .and_then(|exe| exe.canonicalize())
            .map_err(|e| format!("cannot tell this binary's path: {e}"))?;
        Ok(Places {
            home: var("HOME").or_else(|| var("USERPROFILE")),
            appdata: var("APPDATA"),
            xdg_config: var("XDG_CONFIG_HOME"),
            cwd: std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
            exe,
        })
    }

    fn home(&self) -> Result<&Path, String> {
        self.home
            .as_deref()
            .ok_or_else(|| "no home directory: set HOME".to_owned())
    }

    /// The per-user application data directory the OS gives desktop apps.
    fn app_config(&self) -> Result<PathBuf, String> {
        if cfg!(target_os = "macos") {
            Ok(self.home()?.join("Library/Application Support"))
        } else if cfg!(windows) {
            self.appdata
                .clone()
                .ok_or_else(|| "no application data directory: set APPDATA".to_owned())
        } else {
            match &self.xdg_config {
                Some(dir) => Ok(dir.clone()),
                None => Ok(self.home()?.join(".config")),
            }
        }
    }

    /// The configuration file `install` writes for `host`.
    pub fn file(&self, host: Host, project: bool) -> Result<PathBuf, String> {
        Ok(match (host, project) {
            (Host::ClaudeDesktop, _) => {
                self.app_config()?.join("Claude/claude_desktop_config.json")
            }
            (Host::ClaudeCode, false) => self.home()?.join(".claude.json"),
            (Host::ClaudeCode, true) => self.cwd.join(".mcp.json"),
            (Host::Cursor, false) => self.home()?.join(".cursor/mcp.json"),
            (Host::Cursor, true) => self.cwd.join(".cursor/mcp.json"),
            (Host::VsCode, false) => self.app_config()?.join("Code/User/mcp.json"),
            (Host::VsCode, true) => self.cwd.join(".vscode/mcp.json"),
        })
    }
}

fn object(pairs: &[(String, String)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// The host's entry for this server.
pub(crate) fn entry(host: Host, transport: &Transport, exe: &Path) -> Value {
    let mut entry = match transport {
        Transport::Stdio { env } => {
            let mut entry = json!({"command": exe.display().to_string(), "args": ["mcp"]});
            if !env.is_empty() {
                entry["env"] = object(env);
            }
            entry
        }
        Transport::Http { url, headers } => {
            let mut entry = json!({"url": url});
            if !headers.is_empty() {
                entry["headers"] = object(headers);
            }
            entry
        }
    };
    // Claude Code and VS Code say which transport; Claude Desktop and Cursor tell by the keys.
    if matches!(host, Host::ClaudeCode | Host::VsCode) {
        let kind = match transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        };
        entry
            .as_object_mut()
            .expect("an object")
            .insert("type".into(), json!(kind));
    }
    entry
}

/// The file's new content with `name` set to `entry`, or why it cannot be: the text is not a
/// JSON object, its servers are not an object, or (without `force`) the name is taken by
/// another entry. `Ok(None)`: the same entry is already there.
pub(crate) fn merge(
    host: Host,
    text: Option<&str>,
    shown: &str,
    name: &str,
    entry: &Value,
    force: bool,
) -> Result<Option<(Value, Option<Value>)>, Refusal> {
    let mut document = match text {
        None => Value::Object(Map::new()),
        Some(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Some(text) => serde_json::from_str::<Value>(text).map_err(|e| {
            Refusal::Unreadable(format!(
                "{shown} is not JSON ({e}); it was left as it is. Fix it, or add this to its `{}` by hand:\n{}",
                host.key(),
                pretty(&json!({ name: entry }))
            ))
        })?,
    };
    let Some(top) = document.as_object_mut() else {
        return Err(Refusal::Unreadable(format!(
            "{shown} is not a JSON object; it was left as it is"
        )));
    };
    let servers = top
        .entry(host.key())
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(servers) = servers.as_object_mut() else {
        return Err(Refusal::Unreadable(format!(
            "`{}` in {shown} is not an object; it was left as it is",
            host.key()
        )));
    };
    let previous = servers.get(name).cloned();
    match &previous {
        Some(old) if old == entry => return Ok(None),
        Some(old) if !force => {
            return Err(Refusal::Taken(format!(
                "{shown} already has a server named `{name}`:\n{}\nnot replaced: --force replaces it, --name installs beside it",
                pretty(old)
            )));
        }
        _ => {}
    }
    servers.insert(name.to_owned(), entry.clone());
    Ok(Some((document, previous)))
}

/// Why `install` wrote nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The file cannot be read as the host's configuration (exit 2).
    Unreadable(String),
    /// The name is taken and `--force` was not given (exit 1).
    Taken(String),
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("JSON serializes")
}

/// `- old` / `+ new` lines of the entry, for `--dry-run`.
fn diff(name: &str, old: Option<&Value>, new: &Value) -> String {
    let mut lines = Vec::new();
    if let Some(old) = old {
        for line in pretty(&json!({ name: old })).lines() {
            lines.push(format!("- {line}"));
        }
    }
    for line in pretty(&json!({ name: new })).lines() {
        lines.push(format!("+ {line}"));
    }
    lines.join("\n")
}

/// Runs `install`; returns the exit code (0 written or already there, 1 the name is taken, 2 the
/// file cannot be read or written).
pub(crate) fn run(install: &Install, places: &Places, default_name: &str) -> i32 {
    let path = match places.file(install.host, install.project) {
        Ok(path) => path,
        Err(error) => {
            eprintln!("error: {error}");
            return 2;
        }
    };
    let shown = path.display().to_string();
    let name = install.name.as_deref().unwrap_or(default_name);
    let entry = entry(install.host, &install.transport, &places.exe);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            eprintln!("error: cannot read {shown}: {e}");
            return 2;
        }
    };
    let (document, previous) = match merge(
        install.host,
        text.as_deref(),
        &shown,
        name,
        &entry,
        install.force,
    ) {
        Ok(Some(merged)) => merged,
        Ok(None) => {
            println!("{shown}: `{name}` is already installed as this; nothing to do");
            return 0;
        }
        Err(Refusal::Unreadable(why)) => {
            eprintln!("error: {why}");
            return 2;
        }
        Err(Refusal::Taken(why)) => {
            eprintln!("error: {why}");
            return 1;
        }
    };
    let verb = if previous.is_some() { "replace" } else { "add" };
    let change = diff(name, previous.as_ref(), &entry);
    if install.dry_run {
        let file = if text.is_some() { "" } else { " (a new file)" };
        println!(
            "would {verb} `{name}` {} `{}` of {shown}{file}:\n{change}\n(--dry-run: nothing written)",
            if previous.is_some() { "in" } else { "to" },
            install.host.key()
        );
        return 0;
    }
    match write(&path, text.is_some(), &(pretty(&document) + "\n")) {
        Ok(backup) => {
            let backup = backup.map_or(String::new(), |b| {
                format!(" (the previous file: {})", b.display())
            });
            let done = if previous.is_some() {
                "replaced"
            } else {
                "added"
            };
            let to = if previous.is_some() { "in" } else { "to" };
            println!("{done} `{name}` {to} {shown}{backup}:\n{change}");
            println!("restart {} to load it", install.host.title());
            0
        }
        Err(error) => {
            eprintln!("error: cannot write {shown}: {error}; it was left as it was");
            2
        }
    }
}

/// Writes `content` to `path` whole or not at all (a file beside it, renamed over it), after
/// copying the existing file to a backup beside it; returns the backup's path.
fn write(path: &Path, existed: bool, content: &str) -> std::io::Result<Option<PathBuf>> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let backup = if existed {
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // A new name each time: a second install never overwrites the first one's backup.
        let mut backup = path.with_file_name(format!("{file_name}.{seconds}.bak"));
        let mut n = 1;
        while backup.exists() {
            backup = path.with_file_name(format!("{file_name}.{seconds}-{n}.bak"));
            n += 1;
        }
        std::fs::copy(path, &backup)?;
        Some(backup)
    } else {
        None
    };
    let temporary = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    std::fs::write(&temporary, content)?;
    // The file keeps its permissions (`~/.claude.json` may hold tokens).
    if existed {
        if let Ok(metadata) = std::fs::metadata(path) {
            let _ = std::fs::set_permissions(&temporary, metadata.permissions());
        }
    }
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    /// A temporary home (and project) of its own, removed when dropped.
    struct Home(PathBuf);

    impl Home {
        fn new(test: &str) -> Home {
            let dir =
                std::env::temp_dir().join(format!("oxp-install-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("project")).unwrap();
            Home(dir)
        }

        fn places(&self) -> Places {
            Places {
                home: Some(self.0.clone()),
                appdata: Some(self.0.join("AppData/Roaming")),
                xdg_config: None,
                cwd: self.0.join("project"),
                exe: PathBuf::from("/opt/tools/bin/calculator"),
            }
        }

        fn read(&self, path: &Path) -> Value {
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        }

        fn backups(&self, path: &Path) -> Vec<PathBuf> {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let mut found: Vec<PathBuf> = std::fs::read_dir(path.parent().unwrap())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    n.starts_with(&format!("{name}.")) && n.ends_with(".bak")
                })
                .collect();
            found.sort();
            found
        }
    }

    impl Drop for Home {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn install(line: &str, places: &Places) -> i32 {
        run(&parse(&args(line)).unwrap(), places, "calculator")
    }

    #[test]
    fn each_host_gets_its_own_file_and_shape() {
        let home = Home::new("shapes");
        let places = home.places();
        let cases = [
            (
                "claude-desktop",
                // Linux: $XDG_CONFIG_HOME, else ~/.config (macOS and Windows differ: see above).
                home.0.join(".config/Claude/claude_desktop_config.json"),
                "mcpServers",
                json!({"command": "/opt/tools/bin/calculator", "args": ["mcp"]}),
            ),
            (
                "claude-code",
                home.0.join(".claude.json"),
                "mcpServers",
                json!({"type": "stdio", "command": "/opt/tools/bin/calculator", "args": ["mcp"]}),
            ),
            (
                "cursor",
                home.0.join(".cursor/mcp.json"),
                "mcpServers",
                json!({"command": "/opt/tools/bin/calculator", "args": ["mcp"]}),
            ),
            (
                "vscode",
                home.0.join(".config/Code/User/mcp.json"),
                "servers",
                json!({"type": "stdio", "command": "/opt/tools/bin/calculator", "args": ["mcp"]}),
            ),
        ];
        for (host, path, key, expected) in cases {
            assert_eq!(install(host, &places), 0, "{host}");
            assert_eq!(
                home.read(&path),
                json!({ key: {"calculator": expected} }),
                "{host}"
            );
            assert!(
                home.backups(&path).is_empty(),
                "a new file has nothing to back up"
            );
        }
        // Over HTTP, with headers; each in the project's file.
        let url = "--url http://127.0.0.1:8000 --header Authorization=Bearer%20k --project";
        let http = |typed: bool| {
            let mut entry = json!({"url": "http://127.0.0.1:8000/mcp",
                "headers": {"Authorization": "Bearer%20k"}});
            if typed {
                entry["type"] = json!("http");
            }
            entry
        };
        for (host, file, key, typed) in [
            ("claude-code", ".mcp.json", "mcpServers", true),
            ("cursor", ".cursor/mcp.json", "mcpServers", false),
            ("vscode", ".vscode/mcp.json", "servers", true),
        ] {
            assert_eq!(install(&format!("{host} {url}"), &places), 0, "{host}");
            let written = home.read(&home.0.join("project").join(file));
            assert_eq!(
                written,
                json!({ key: {"calculator": http(typed)} }),
                "{host}"
            );
        }
        // Claude Desktop's file takes no URL: said, not written.
        let refused = parse(&args("claude-desktop --url https://tools.example.com/mcp"));
        assert!(refused.unwrap_err().contains("Connectors"));
    }

    #[test]
    fn a_file_is_merged_into_backed_up_and_never_loses_a_server() {
        let home = Home::new("merge");
        let places = home.places();
        let path = home.0.join(".claude.json");
        let before = json!({
            "numStartups": 12,
            "projects": {"/src/app": {"mcpServers": {}}},
            "mcpServers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}}
        });
        std::fs::write(&path, pretty(&before)).unwrap();
        assert_eq!(
            install("claude-code --env OXP_TOOLS=Calculator.*", &places),
            0
        );
        let after = home.read(&path);
        assert_eq!(after["numStartups"], 12);
        assert_eq!(after["projects"], before["projects"]);
        assert_eq!(
            after["mcpServers"]["github"],
            before["mcpServers"]["github"]
        );
        assert_eq!(
            after["mcpServers"]["calculator"]["env"],
            json!({"OXP_TOOLS": "Calculator.*"})
        );
        let backups = home.backups(&path);
        assert_eq!(backups.len(), 1);
        assert_eq!(
            home.read(&backups[0]),
            before,
            "the backup is the file as it was"
        );

        // The same entry again: nothing to do, nothing written.
        assert_eq!(
            install("claude-code --env OXP_TOOLS=Calculator.*", &places),
            0
        );
        assert_eq!(home.backups(&path).len(), 1);
        // Another entry under the same name: refused without --force, the file untouched.
        assert_eq!(install("claude-code", &places), 1);
        assert_eq!(home.read(&path), after);
        // --dry-run writes nothing, even with --force.
        assert_eq!(install("claude-code --force --dry-run", &places), 0);
        assert_eq!(home.read(&path), after);
        // --force replaces it (and keeps a second backup); --name installs beside it.
        assert_eq!(install("claude-code --force", &places), 0);
        assert_eq!(
            home.read(&path)["mcpServers"]["calculator"].get("env"),
            None
        );
        assert_eq!(home.backups(&path).len(), 2);
        assert_eq!(install("claude-code --name calc-2", &places), 0);
        let last = home.read(&path);
        // In the file's order, or sorted where serde_json is built without `preserve_order`.
        let mut names: Vec<&String> = last["mcpServers"].as_object().unwrap().keys().collect();
        names.sort();
        assert_eq!(names, ["calc-2", "calculator", "github"]);
    }

    #[test]
    fn a_file_that_is_not_json_is_said_and_left_alone() {
        let home = Home::new("notjson");
        let places = home.places();
        let path = home.0.join(".cursor/mcp.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // VS Code and Cursor files may carry comments: JSON with them is not rewritten.
        let text = "{\n  // mine\n  \"mcpServers\": {}\n}\n";
        std::fs::write(&path, text).unwrap();
        let shown = path.display().to_string();
        let entry = entry(Host::Cursor, &Transport::Stdio { env: vec![] }, &places.exe);
        let refusal = merge(Host::Cursor, Some(text), &shown, "calculator", &entry, true);
        let Err(Refusal::Unreadable(why)) = refusal else {
            panic!("{refusal:?}")
        };
        assert!(
            why.contains("is not JSON") && why.contains("\"calculator\""),
            "{why}"
        );
        assert_eq!(install("cursor --force", &places), 2);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert!(home.backups(&path).is_empty());
        // Servers under the key that are not an object: the same.
        std::fs::write(&path, "{\"mcpServers\": []}").unwrap();
        assert_eq!(install("cursor", &places), 2);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"mcpServers\": []}"
        );
    }

    #[test]
    fn the_command_line() {
        let parsed = parse(&args(
            "vscode --url=https://t.example.com/ --header X-Key:abc --name t",
        ))
        .unwrap();
        assert_eq!(
            parsed.transport,
            Transport::Http {
                url: "https://t.example.com/mcp".into(),
                headers: vec![("X-Key".into(), "abc".into())]
            }
        );
        assert_eq!(parsed.name.as_deref(), Some("t"));
        assert_eq!(endpoint("http://h:1/api/mcp"), "http://h:1/api/mcp");
        assert!(
            parse(&args("zed"))
                .unwrap_err()
                .contains("unknown host `zed`")
        );
        assert!(parse(&args("cursor --header A=b")).is_err());
        assert!(parse(&args("cursor --url ftp://x")).is_err());
        assert!(parse(&args("cursor --url http://x --env A=b")).is_err());
        assert!(parse(&args("claude-desktop --project")).is_err());
        assert!(parse(&[]).is_err());
    }
}
