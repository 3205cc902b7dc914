//! Tool versions and tool ids, by the OXP grammar.
//!
//! OXP versions are not full semver: exactly `x.y.z` of digits, leading zeros allowed (`@01` is a
//! valid id), no pre-release or build parts. The `semver` crate rejects leading zeros and accepts
//! pre-releases, so the grammar is checked here, where it is three lines.

use std::fmt;

/// A tool version `x.y.z`, ordered numerically (`1.10.0 > 1.9.0`).
///
/// ```
/// use oxp_runtime::ToolVersion;
///
/// let v: ToolVersion = "1.10.0".parse().unwrap();
/// assert!(v > "1.9.0".parse().unwrap());
/// assert!("1.0".parse::<ToolVersion>().is_err());
/// assert!("1.0.0-rc1".parse::<ToolVersion>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolVersion {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
}

/// Why a version or tool id did not parse.
///
/// ```
/// let error = "1.2".parse::<oxp_runtime::ToolVersion>().unwrap_err();
/// assert!(!error.to_string().is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub(crate) &'static str);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for ParseError {}

/// A part of a version: ASCII digits only. `None` when it is not, or it overflows `u64`
/// (a version that large cannot be registered, so it is simply unavailable).
fn number(part: &str) -> Result<Option<u64>, ParseError> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError(
            "version parts are digits: write x.y.z, like 1.0.0",
        ));
    }
    Ok(part.parse().ok())
}

/// Parses `x.y.z`; `Ok(None)` when well-formed but a part overflows `u64`.
fn parse_version(s: &str) -> Result<Option<ToolVersion>, ParseError> {
    let parts: Vec<&str> = s.split('.').collect();
    let [major, minor, patch] = parts[..] else {
        return Err(ParseError(
            "a version has three parts: write x.y.z, like 1.0.0",
        ));
    };
    Ok(match (number(major)?, number(minor)?, number(patch)?) {
        (Some(major), Some(minor), Some(patch)) => Some(ToolVersion {
            major,
            minor,
            patch,
        }),
        _ => None,
    })
}

impl std::str::FromStr for ToolVersion {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        parse_version(s)?.ok_or(ParseError("a version part is larger than 2^64"))
    }
}

impl fmt::Display for ToolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Which version a tool id asks for.
///
/// ```
/// use oxp_runtime::version::{ToolId, VersionRequest};
/// assert_eq!(ToolId::parse("Math.Which").unwrap().version, VersionRequest::Latest);
/// assert!(matches!(ToolId::parse("Math.Which@1.2.0").unwrap().version, VersionRequest::Exact(_)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionRequest {
    /// No `@`: the numerically latest version.
    Latest,
    /// `@x.y.z` (or `@x`, which means exactly `x.0.0`).
    Exact(ToolVersion),
    /// A version too large to exist: the id is well-formed, the version is simply unavailable.
    Unavailable,
}

/// A parsed `Toolkit.Name[@version]`.
///
/// ```
/// use oxp_runtime::version::{ToolId, VersionRequest};
///
/// let id = ToolId::parse("Math.Which@1").unwrap();
/// assert_eq!((id.toolkit, id.name), ("Math", "Which"));
/// assert_eq!(id.version, VersionRequest::Exact("1.0.0".parse().unwrap()));
/// for bad in ["Math.Which@1.0", "Math.Which@", "Which@1.0.0", "A.B.C", "Math.Which@1.2.0-beta"] {
///     assert!(ToolId::parse(bad).is_err(), "{bad}");
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolId<'a> {
    /// The toolkit.
    pub toolkit: &'a str,
    /// The tool's name within the toolkit.
    pub name: &'a str,
    /// The version asked for.
    pub version: VersionRequest,
}

/// Whether `s` is a valid toolkit or tool name segment of an id: `[A-Za-z0-9_]+`.
///
/// ```
/// assert!(oxp_runtime::version::is_segment("Calculator_2"));
/// assert!(!oxp_runtime::version::is_segment("Calc.ulator"));
/// ```
pub fn is_segment(s: &str) -> bool {
    crate::rules::is_segment(s)
}

impl<'a> ToolId<'a> {
    /// Parses an id by the spec's `ToolId` pattern.
    ///
    /// ```
    /// let id = oxp_runtime::version::ToolId::parse("Math.Which@1.10.0").unwrap();
    /// assert_eq!((id.toolkit, id.name), ("Math", "Which"));
    /// assert!(oxp_runtime::version::ToolId::parse("Math.Which@1.0").is_err());
    /// ```
    pub fn parse(id: &'a str) -> Result<Self, ParseError> {
        let (path, version) = match id.split_once('@') {
            Some((path, version)) => (path, Some(version)),
            None => (id, None),
        };
        let Some((toolkit, name)) = path.split_once('.') else {
            return Err(ParseError(
                "a tool id is Toolkit.Name, optionally @x or @x.y.z",
            ));
        };
        if !is_segment(toolkit) || !is_segment(name) {
            return Err(ParseError(
                "toolkit and tool names are letters, digits and underscores, joined by one dot",
            ));
        }
        let version = match version {
            None => {
                return Ok(ToolId {
                    toolkit,
                    name,
                    version: VersionRequest::Latest,
                });
            }
            Some(v) if !v.contains('.') => number(v)?.map(|major| ToolVersion {
                major,
                minor: 0,
                patch: 0,
            }),
            Some(v) => parse_version(v)?,
        }
        .map_or(VersionRequest::Unavailable, VersionRequest::Exact);
        Ok(ToolId {
            toolkit,
            name,
            version,
        })
    }
}
