//! Exhaustiveness of `match`: finds a value that no clause matches, written as a pattern
//! (`Nil`, `Cons(_, Nil)`, `(Zero(_), _)`), with the usefulness algorithm of Maranget's
//! "Warnings for pattern matching" over constructors, tuples and wildcards.

use std::collections::HashSet;

use relay_ir::{Module, Pattern, PatternKind, Symbol};

/// A pattern reduced to what coverage depends on: variables are wildcards.
#[derive(Clone, Debug)]
enum Pat {
    Wild,
    Ctor {
        adt: Symbol,
        tag: u32,
        name: Symbol,
        fields: Vec<Pat>,
    },
    Tuple(Vec<Pat>),
}

impl Pat {
    fn from_pattern(p: &Pattern) -> Pat {
        relay_ir::ensure_sufficient_stack(|| match &p.kind {
            PatternKind::Wildcard | PatternKind::Var(_) => Pat::Wild,
            PatternKind::Ctor(c, fields) => Pat::Ctor {
                adt: c.adt,
                tag: c.tag,
                name: c.name,
                fields: fields.iter().map(Pat::from_pattern).collect(),
            },
            PatternKind::Tuple(fields) => {
                Pat::Tuple(fields.iter().map(Pat::from_pattern).collect())
            }
        })
    }

    fn write(&self, out: &mut String) {
        relay_ir::ensure_sufficient_stack(|| match self {
            Pat::Wild => out.push('_'),
            Pat::Ctor { name, fields, .. } => {
                out.push_str(name.as_str());
                if !fields.is_empty() {
                    write_list(fields, out);
                }
            }
            Pat::Tuple(fields) => {
                write_list(fields, out);
                if fields.len() == 1 {
                    out.pop();
                    out.push_str(",)");
                }
            }
        })
    }
}

fn write_list(fields: &[Pat], out: &mut String) {
    out.push('(');
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        f.write(out);
    }
    out.push(')');
}

/// A value the patterns of a complete `match` do not cover, written as a pattern, or `None`
/// when they cover everything.
pub(crate) fn missing_pattern<'p>(
    module: &Module,
    patterns: impl Iterator<Item = &'p Pattern>,
) -> Option<String> {
    let rows: Vec<Vec<Pat>> = patterns.map(|p| vec![Pat::from_pattern(p)]).collect();
    let witness = Coverage { module }.missing(&rows, 1)?;
    let mut out = String::new();
    witness.first().unwrap_or(&Pat::Wild).write(&mut out);
    Some(out)
}

struct Coverage<'m> {
    module: &'m Module,
}

impl Coverage<'_> {
    /// The constructors of `adt`: name and field count, in tag order.
    fn ctors(&self, adt: Symbol) -> Vec<(Symbol, usize)> {
        self.module
            .type_def(adt)
            .map(|t| t.ctors.iter().map(|c| (c.name, c.fields.len())).collect())
            .unwrap_or_default()
    }

    /// A vector of `width` values matched by no row, as patterns.
    fn missing(&self, rows: &[Vec<Pat>], width: usize) -> Option<Vec<Pat>> {
        relay_ir::ensure_sufficient_stack(|| self.missing_inner(rows, width))
    }

    fn missing_inner(&self, rows: &[Vec<Pat>], width: usize) -> Option<Vec<Pat>> {
        if width == 0 {
            return rows.is_empty().then(Vec::new);
        }
        let mut tuple_arity = None;
        let mut adt = None;
        let mut used = HashSet::new();
        for row in rows {
            match row.first() {
                Some(Pat::Tuple(fields)) => tuple_arity = Some(fields.len()),
                Some(Pat::Ctor { adt: a, tag, .. }) => {
                    adt = Some(*a);
                    used.insert(*tag);
                }
                _ => {}
            }
        }
        if let Some(arity) = tuple_arity {
            let rows = specialize(rows, arity, |p| match p {
                Pat::Tuple(fields) => Some(fields.clone()),
                _ => None,
            });
            let mut w = self.missing(&rows, arity + width - 1)?;
            let rest = w.split_off(arity);
            return Some(prepend(Pat::Tuple(w), rest));
        }
        if let Some(adt) = adt {
            let ctors = self.ctors(adt);
            let complete = (0..ctors.len() as u32).all(|tag| used.contains(&tag));
            if complete {
                for (tag, &(name, arity)) in ctors.iter().enumerate() {
                    let tag = tag as u32;
                    let rows = specialize(rows, arity, |p| match p {
                        Pat::Ctor { tag: t, fields, .. } if *t == tag => Some(fields.clone()),
                        _ => None,
                    });
                    if let Some(mut w) = self.missing(&rows, arity + width - 1) {
                        let rest = w.split_off(arity);
                        let ctor = Pat::Ctor {
                            adt,
                            tag,
                            name,
                            fields: w,
                        };
                        return Some(prepend(ctor, rest));
                    }
                }
                return None;
            }
            let rest = self.missing(&default_rows(rows), width - 1)?;
            let (tag, &(name, arity)) = ctors
                .iter()
                .enumerate()
                .find(|(tag, _)| !used.contains(&(*tag as u32)))?;
            let ctor = Pat::Ctor {
                adt,
                tag: tag as u32,
                name,
                fields: vec![Pat::Wild; arity],
            };
            return Some(prepend(ctor, rest));
        }
        let rest = self.missing(&default_rows(rows), width - 1)?;
        Some(prepend(Pat::Wild, rest))
    }
}

/// The rows that match a value built by one constructor of `arity` fields: `fields_of` gives a
/// matching head's fields; wildcard heads match with `arity` wildcards.
fn specialize(
    rows: &[Vec<Pat>],
    arity: usize,
    fields_of: impl Fn(&Pat) -> Option<Vec<Pat>>,
) -> Vec<Vec<Pat>> {
    let mut out = Vec::new();
    for row in rows {
        let Some((head, rest)) = row.split_first() else {
            continue;
        };
        let fields = match head {
            Pat::Wild => vec![Pat::Wild; arity],
            other => match fields_of(other) {
                Some(fields) if fields.len() == arity => fields,
                _ => continue,
            },
        };
        let mut new_row = fields;
        new_row.extend(rest.iter().cloned());
        out.push(new_row);
    }
    out
}

/// The rows whose head is a wildcard, without it.
fn default_rows(rows: &[Vec<Pat>]) -> Vec<Vec<Pat>> {
    rows.iter()
        .filter(|row| matches!(row.first(), Some(Pat::Wild)))
        .map(|row| row[1..].to_vec())
        .collect()
}

fn prepend(head: Pat, rest: Vec<Pat>) -> Vec<Pat> {
    let mut out = Vec::with_capacity(rest.len() + 1);
    out.push(head);
    out.extend(rest);
    out
}
