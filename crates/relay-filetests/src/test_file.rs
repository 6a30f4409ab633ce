//! Reading an `ir-tests/` file: the `// test <kind> [options...]` header, the filecheck
//! directives, and the `// output:` block at the end.

use std::path::{Path, PathBuf};

use crate::Failure;

/// The filecheck directive keywords a `// keyword: ...` comment line may start with.
pub const DIRECTIVES: &[&str] = &["check", "nextln", "sameln", "not", "unordered", "regex"];

/// The line that starts the precise-output block.
pub const OUTPUT_MARKER: &str = "// output:";

/// One test file, split into its parts.
#[derive(Debug)]
pub struct TestFile<'a> {
    /// Where the file is.
    pub path: &'a Path,
    /// The file name alone (`foo.relay`): the source name for parsing, so rendered diagnostics
    /// do not depend on where the repository is checked out.
    pub name: String,
    /// The whole text.
    pub text: &'a str,
    /// The test kind from the header (`parse`, `fmt`, ...).
    pub kind: &'a str,
    /// The options after the kind.
    pub options: Vec<&'a str>,
    /// The filecheck directives in file order, with their 1-based line numbers, `//` removed
    /// (e.g. `check: %0 = add`).
    pub directives: Vec<(usize, &'a str)>,
    /// The `// output:` block, if the file has one.
    pub output: Option<OutputBlock>,
}

/// The precise-output block: from the `// output:` line to the end of the file.
#[derive(Debug)]
pub struct OutputBlock {
    /// Byte offset of the `// output:` line in the file.
    pub start: usize,
    /// The expected lines, comment markers removed.
    pub lines: Vec<String>,
}

impl<'a> TestFile<'a> {
    /// The program: the text before the `// output:` block (the whole text when there is none).
    /// A `#[metadata]` section runs to the end of what the parser reads, so it must not see the
    /// block.
    pub fn program(&self) -> &'a str {
        match &self.output {
            Some(block) => &self.text[..block.start],
            None => self.text,
        }
    }

    /// Splits `text` (the contents of `path`) into header, directives and output block.
    pub fn parse(path: &'a Path, text: &'a str) -> Result<TestFile<'a>, Failure> {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );

        let first = text.lines().next().unwrap_or("");
        let header = first
            .strip_prefix("//")
            .map(str::trim)
            .and_then(|rest| rest.strip_prefix("test"))
            .filter(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace));
        let Some(header) = header else {
            return Err(Failure::new(format!(
                "the first line must be `// test <kind> [options...]`, found `{first}`"
            )));
        };
        let mut words = header.split_whitespace();
        let Some(kind) = words.next() else {
            return Err(Failure::new("the `// test` header names no test kind"));
        };
        let options = words.collect();

        let mut directives = Vec::new();
        let mut output = None;
        let mut offset = 0;
        for (index, line) in text.split_inclusive('\n').enumerate() {
            let number = index + 1;
            let content = line.trim_end_matches(['\n', '\r']);
            if content.trim_end() == OUTPUT_MARKER {
                output = Some(OutputBlock::read(path, text, offset, number)?);
                break;
            }
            if index > 0
                && let Some(directive) = directive(content)
            {
                directives.push((number, directive));
            }
            offset += line.len();
        }

        Ok(TestFile {
            path,
            name,
            text,
            kind,
            options,
            directives,
            output,
        })
    }

    /// Whether the header lists `option`.
    pub fn has_option(&self, option: &str) -> bool {
        self.options.contains(&option)
    }

    /// The golden file for rendered diagnostics: the same path with extension `.stderr`.
    pub fn stderr_path(&self) -> PathBuf {
        self.path.with_extension("stderr")
    }
}

impl OutputBlock {
    /// Reads the block whose marker line starts at byte `start` (line `marker_line`).
    fn read(
        path: &Path,
        text: &str,
        start: usize,
        marker_line: usize,
    ) -> Result<OutputBlock, Failure> {
        let mut lines = Vec::new();
        for (index, line) in text[start..].lines().enumerate().skip(1) {
            let line = line.trim_end_matches('\r');
            let expected = if line == "//" {
                ""
            } else if let Some(rest) = line.strip_prefix("// ") {
                rest
            } else {
                return Err(Failure::new(format!(
                    "{}:{}: every line after `{OUTPUT_MARKER}` must be `// ` followed by \
                     expected output (or `//` for an empty line), found `{line}`",
                    path.display(),
                    marker_line + index
                )));
            };
            lines.push(expected.to_owned());
        }
        Ok(OutputBlock { start, lines })
    }
}

/// The directive in a `// keyword: ...` comment line, without the `//`; `None` for any other
/// line. Only whole-line comments count, so a directive keyword inside program text or inside
/// a longer comment is not mistaken for one.
fn directive(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("//")?.trim_start();
    let keyword = rest.split(':').next()?;
    (rest.len() > keyword.len() && DIRECTIVES.contains(&keyword)).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TestFile<'_>, Failure> {
        TestFile::parse(Path::new("dir/example.relay"), text)
    }

    #[test]
    fn header_kind_and_options() {
        let file = parse("// test parse error\n#[version = \"0.0.5\"]\n").unwrap();
        assert_eq!(file.kind, "parse");
        assert_eq!(file.options, ["error"]);
        assert!(file.has_option("error"));
        assert_eq!(file.name, "example.relay");
        assert_eq!(file.stderr_path(), Path::new("dir/example.stderr"));
    }

    #[test]
    fn missing_header_is_an_error() {
        let err = parse("#[version = \"0.0.5\"]\n").unwrap_err();
        assert!(err.message().contains("// test <kind>"), "{err}");
        assert!(parse("// testing\n").is_err());
        assert!(parse("// test\n").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn directives_are_whole_line_comments() {
        let text = "// test parse\n\
                    def @f() { () }\n\
                    // check: def @f\n\
                    \x20 //   nextln: ()\n\
                    // a comment that mentions check: but is not one\n\
                    // regex: N=\\d+\n\
                    // checks: not a directive\n";
        let file = parse(text).unwrap();
        assert_eq!(
            file.directives,
            [
                (3, "check: def @f"),
                (4, "nextln: ()"),
                (6, "regex: N=\\d+")
            ]
        );
    }

    #[test]
    fn output_block_runs_to_the_end() {
        let text = "// test fmt\n() \n// check: ()\n// output:\n// ()\n//\n// x\n";
        let file = parse(text).unwrap();
        let block = file.output.unwrap();
        assert_eq!(
            &text[block.start..block.start + OUTPUT_MARKER.len()],
            OUTPUT_MARKER
        );
        assert_eq!(block.lines, ["()", "", "x"]);
        assert_eq!(file.directives, [(3, "check: ()")]);
    }

    #[test]
    fn directives_inside_the_output_block_are_output() {
        let file = parse("// test fmt\n// output:\n// check: x\n").unwrap();
        assert!(file.directives.is_empty());
        assert_eq!(file.output.unwrap().lines, ["check: x"]);
    }

    #[test]
    fn malformed_output_line_is_an_error() {
        let err = parse("// test fmt\n// output:\n// a\nb\n").unwrap_err();
        assert!(err.message().contains(":4:"), "{err}");
    }
}
