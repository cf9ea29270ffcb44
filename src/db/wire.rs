//! What goes over the wire to PostgreSQL and back, the same for every session: a
//! statement's parameters written PostgreSQL's way, its values in the types it takes,
//! and its rows read as SQLite's cells are.

use super::error::{DbError, DbResult};
use super::value::Source;
use postgres::types::{ToSql, Type};
use rusqlite::types::{Value, ValueRef};

/// `sql` with SQLite's parameters (`?N`, and `?` numbered in order) as PostgreSQL's
/// (`$N`); text inside quotes is left as it is.
pub fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut next = 1;
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str(&format!("${next}"));
                    next += 1;
                } else {
                    out.push('$');
                    out.push_str(&digits);
                }
            }
            (None, c) => out.push(c),
        }
    }
    out
}

/// `params` as the types the prepared statement takes: a NULL of the column's type, a
/// number where the column is a number, text where it is text.
pub fn values(
    statement: &postgres::Statement,
    params: &[Value],
) -> DbResult<Vec<Box<dyn ToSql + Sync>>> {
    let types = statement.params();
    if types.len() != params.len() {
        return Err(DbError::Value(format!(
            "the statement takes {} values, {} were given",
            types.len(),
            params.len()
        )));
    }
    types
        .iter()
        .zip(params)
        .map(|(ty, value)| value_as(ty, value))
        .collect()
}

fn value_as(ty: &Type, value: &Value) -> DbResult<Box<dyn ToSql + Sync>> {
    let wrong = || {
        DbError::Value(format!(
            "{:?} given where PostgreSQL takes {ty}",
            value.data_type()
        ))
    };
    Ok(match (ty, value) {
        (&Type::INT8, Value::Null) => Box::new(None::<i64>),
        (&Type::INT4, Value::Null) => Box::new(None::<i32>),
        (&Type::FLOAT8, Value::Null) => Box::new(None::<f64>),
        (&Type::BOOL, Value::Null) => Box::new(None::<bool>),
        (_, Value::Null) => Box::new(None::<String>),
        (&Type::INT8, Value::Integer(n)) => Box::new(*n),
        (&Type::INT4, Value::Integer(n)) => Box::new(i32::try_from(*n).map_err(|_| wrong())?),
        (&Type::FLOAT8, Value::Integer(n)) => Box::new(*n as f64),
        (&Type::BOOL, Value::Integer(n)) => Box::new(*n != 0),
        (&Type::FLOAT8, Value::Real(x)) => Box::new(*x),
        (&Type::INT8, Value::Real(x)) if x.fract() == 0.0 => Box::new(*x as i64),
        (&Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME, Value::Text(text)) => {
            Box::new(text.clone())
        }
        (&Type::TEXT | &Type::VARCHAR, Value::Integer(n)) => Box::new(n.to_string()),
        (&Type::TEXT | &Type::VARCHAR, Value::Real(x)) => Box::new(x.to_string()),
        (&Type::JSONB | &Type::JSON, Value::Text(_)) => return Err(wrong()),
        _ => return Err(wrong()),
    })
}

/// A PostgreSQL row read as a SQLite row is: integers, reals, text and NULL.
pub struct PgRow<'r>(pub &'r postgres::Row);

/// A cell as the server sent it (binary format), for a reader that knows its type.
pub struct Raw<'a>(pub &'a [u8]);

impl<'a> postgres::types::FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A number's cell of the wrong width: a server that does not speak the binary format.
#[derive(Debug, thiserror::Error)]
#[error("a {ty} cell of {len} bytes")]
struct Width {
    ty: Type,
    len: usize,
}

/// `bytes`, whose length was checked, as an array.
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(bytes);
    out
}

impl Source for PgRow<'_> {
    fn cell(&self, index: usize) -> rusqlite::Result<ValueRef<'_>> {
        let row = self.0;
        let column = row
            .columns()
            .get(index)
            .ok_or_else(|| rusqlite::Error::InvalidColumnIndex(index))?;
        let failed = |err: Box<dyn std::error::Error + Send + Sync>| {
            rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Null, err)
        };
        let ty = column.type_();
        let text_like = matches!(
            *ty,
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
        );
        let Some(Raw(raw)) = row
            .try_get::<_, Option<Raw<'_>>>(index)
            .map_err(|err| failed(Box::new(err)))?
        else {
            return Ok(ValueRef::Null);
        };
        // Numbers in network order, of their type's width; text as its bytes, which the
        // decoder checks are UTF-8 as it does a SQLite cell's.
        let be = |width: usize| -> rusqlite::Result<&[u8]> {
            if raw.len() == width {
                return Ok(raw);
            }
            let ty = ty.clone();
            Err(failed(Box::new(Width { ty, len: raw.len() })))
        };
        Ok(match *ty {
            Type::INT8 => ValueRef::Integer(i64::from_be_bytes(array(be(8)?))),
            Type::INT4 => ValueRef::Integer(i32::from_be_bytes(array(be(4)?)).into()),
            Type::INT2 => ValueRef::Integer(i16::from_be_bytes(array(be(2)?)).into()),
            Type::BOOL => ValueRef::Integer((be(1)?[0] != 0).into()),
            Type::FLOAT8 => ValueRef::Real(f64::from_be_bytes(array(be(8)?))),
            Type::FLOAT4 => ValueRef::Real(f32::from_be_bytes(array(be(4)?)).into()),
            _ if text_like => ValueRef::Text(raw),
            _ => row
                .try_get::<_, Option<&str>>(index)
                .map_err(|err| failed(Box::new(err)))?
                .map_or(ValueRef::Null, |text| ValueRef::Text(text.as_bytes())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_outside_quotes_only() {
        assert_eq!(
            numbered("SELECT ?1, ?2 WHERE a = ?1"),
            "SELECT $1, $2 WHERE a = $1"
        );
        assert_eq!(numbered("a = ? AND b = ?"), "a = $1 AND b = $2");
        assert_eq!(
            numbered("json_extract(p, '$.a?') = ?3"),
            "json_extract(p, '$.a?') = $3"
        );
    }
}
