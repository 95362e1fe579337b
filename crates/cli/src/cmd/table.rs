//! Tables for people, in one place: columns padded by display width, so
//! that Chinese text (two columns a character, unicode-width's East Asian
//! widths) lines up with the rest, and no column is narrower than its
//! widest cell (`reviewer` beside `read`).

use unicode_width::UnicodeWidthStr;

/// A row of cells from string slices.
pub fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.map(str::to_owned).to_vec()
}

/// Rows laid out in columns, two spaces apart; the columns named in
/// `right` aligned to the right (numbers).
pub fn lines(rows: &[Vec<String>], right: &[usize], indent: &str) -> Vec<String> {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            let w = UnicodeWidthStr::width(cell.as_str());
            match widths.get_mut(i) {
                Some(max) => *max = (*max).max(w),
                None => widths.push(w),
            }
        }
    }
    rows.iter()
        .map(|row| {
            let mut line = String::from(indent);
            for (i, cell) in row.iter().enumerate() {
                let pad = widths[i] - UnicodeWidthStr::width(cell.as_str());
                if right.contains(&i) {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    if i + 1 < row.len() {
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                }
                if i + 1 < row.len() {
                    line.push_str("  ");
                }
            }
            line.trim_end().to_owned()
        })
        .collect()
}

/// Prints `rows` as [`lines`] lays them out, indented by two spaces,
/// every column aligned to the left.
pub fn print_table(rows: &[Vec<String>]) -> anyhow::Result<()> {
    for line in lines(rows, &[], "  ") {
        xarchive::outln!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_width::UnicodeWidthStr;

    #[test]
    fn chinese_cells_and_long_words_keep_the_columns_straight() {
        let rows = vec![
            row(["name", "role", "domain"]),
            row(["clerk", "reviewer", "A"]),
            row(["档案员", "read", "any"]),
        ];
        let lines = lines(&rows, &[], "");
        let column = |line: &str, text: &str| {
            let at = line.find(text).expect("cell");
            UnicodeWidthStr::width(&line[..at])
        };
        assert_eq!(column(&lines[0], "role"), column(&lines[1], "reviewer"));
        assert_eq!(column(&lines[1], "reviewer"), column(&lines[2], "read"));
        assert_eq!(column(&lines[0], "domain"), column(&lines[2], "any"));
        assert_eq!(column(&lines[1], "A"), column(&lines[2], "any"));
    }

    #[test]
    fn numbers_are_aligned_to_the_right() {
        let rows = vec![row(["lag", "x"]), row(["7", "y"]), row(["1200", "z"])];
        let lines = lines(&rows, &[0], "");
        assert_eq!(lines, [" lag  x", "   7  y", "1200  z"]);
    }
}
