//! The command line, shared by the `oxp-check` binary and an oxp server's `<bin> check`.

use std::time::Duration;

use crate::{Options, check};

/// What `--help` prints.
pub const USAGE: &str = "\
usage: oxp-check <url> [options]      check the OXP 1.0 server at <url> against the spec

  --json FILE          also write the report as JSON (for CI)
  --api-key KEY        authenticate with `OXP-API-Key: KEY`     (or OXP_CHECK_API_KEY)
  --bearer TOKEN       authenticate with `Authorization: Bearer TOKEN` (or OXP_CHECK_BEARER)
  --jwt-secret SECRET  sign HS256 tokens with the server's secret, and check the token rules
                       (or OXP_CHECK_JWT_SECRET)
  --jwt-audience AUD   the `aud` of those tokens
  --header NAME=VALUE  send a header with every request (repeatable)
  --tool ID            call this tool (default: the first listed without requirements)
  --input JSON         with this input (default: one made from its input schema)
  --timeout SECONDS    per request (default 30)

Each check prints as `PASS|FAIL|SKIP  MUST|SHOULD  §section  what`; sections are those of the
spec's oxp-notes.md. The checker calls a tool of the server: point it at a test deployment, or
name a harmless tool with --tool.
exit: 0 every MUST passed, 1 a MUST failed, 2 usage error or the server could not be checked";

/// The parsed command line: the options, and where the JSON report goes.
#[derive(Clone, Debug)]
pub struct Command {
    /// What to check.
    pub options: Options,
    /// `--json FILE`.
    pub json: Option<std::path::PathBuf>,
}

/// Parses the arguments after the program's name (or after `check`). `Err` is the message to
/// print above the usage (empty for `--help`).
///
/// ```
/// let args = ["http://127.0.0.1:8000", "--json", "oxp.json", "--header", "X-A=1"];
/// let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
/// let command = oxp_check::cli::parse(&args).unwrap();
/// assert_eq!(command.options.headers, [("X-A".to_string(), "1".to_string())]);
/// assert!(oxp_check::cli::parse(&[]).is_err());
/// ```
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut url = None;
    let mut json = None;
    let mut options = Options::new("");
    let mut input = None;
    let mut args = args.iter();
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
            "--help" | "-h" => return Err(String::new()),
            "--json" => json = Some(value()?.into()),
            "--api-key" => options.api_key = Some(value()?),
            "--bearer" => options.bearer = Some(value()?),
            "--jwt-secret" => options.jwt_secret = Some(value()?),
            "--jwt-audience" => options.jwt_audience = Some(value()?),
            "--header" => {
                let header = value()?;
                let (name, value) = header
                    .split_once('=')
                    .or_else(|| header.split_once(':'))
                    .ok_or_else(|| format!("`--header {header}`: expected NAME=VALUE"))?;
                options
                    .headers
                    .push((name.trim().to_owned(), value.trim().to_owned()));
            }
            "--tool" => options.tool = Some(value()?),
            "--input" => {
                let text = value()?;
                let parsed = serde_json::from_str(&text)
                    .map_err(|e| format!("`--input` is not JSON ({e}): {text}"))?;
                input = Some(parsed);
            }
            "--timeout" => {
                let text = value()?;
                let seconds: f64 = text
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| format!("`--timeout {text}`: expected seconds, above 0"))?;
                options.timeout = Duration::from_secs_f64(seconds);
            }
            other if other.starts_with('-') => return Err(format!("unknown option `{other}`")),
            _ if url.is_some() => return Err(format!("unexpected argument `{arg}`")),
            _ => url = Some(arg.clone()),
        }
    }
    let url = url.ok_or("which server? give its URL, e.g. `http://127.0.0.1:8000`")?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("`{url}` is not an http:// or https:// URL"));
    }
    if input.is_some() && options.tool.is_none() {
        return Err("`--input` goes with `--tool`".into());
    }
    options.url = url;
    options.input = input;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    options.api_key = options.api_key.or_else(|| env("OXP_CHECK_API_KEY"));
    options.bearer = options.bearer.or_else(|| env("OXP_CHECK_BEARER"));
    options.jwt_secret = options.jwt_secret.or_else(|| env("OXP_CHECK_JWT_SECRET"));
    Ok(Command { options, json })
}

/// Parses `args`, runs the checks, prints them, writes the JSON; returns the exit code (0 every
/// MUST passed, 1 one failed, 2 the check could not be made).
pub async fn main(args: &[String]) -> i32 {
    let command = match parse(args) {
        Ok(command) => command,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            eprintln!("{USAGE}");
            return 2;
        }
    };
    run(&command).await
}

/// Runs a parsed command: the report on stdout, the JSON to its file; the exit code.
pub async fn run(command: &Command) -> i32 {
    println!(
        "OXP 1.0 conformance of {} (sections: oxp-notes.md)",
        command.options.url
    );
    let report = match check(&command.options).await {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {error}");
            return 2;
        }
    };
    println!("{report}");
    if let Some(path) = &command.json {
        let json = serde_json::to_string_pretty(&report.to_json()).expect("JSON serializes");
        if let Err(error) = std::fs::write(path, json + "\n") {
            eprintln!("error: cannot write {}: {error}", path.display());
            return 2;
        }
    }
    report.exit_code()
}
