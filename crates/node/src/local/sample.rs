//! Sample records with realistic archive numbers, for `xarchive up`,
//! `xarchive sample` and the benchmarks.
//!
//! Numbers follow the usual Chinese archival form: fonds (全宗号), category
//! (门类: WS 文书, KJ 科技, CW 财务, RS 人事), year, retention period (保管期限:
//! Y 永久, D30, D10) and item number, e.g. `J012-WS·2019-D30-00042`. Each
//! domain gets its own fonds, so the IDs of different domains never collide.
//!
//! Personnel records (人事) are about people, and carry their keys: a valid
//! resident identity number and name with birth date. Every fourth record
//! is one; domain `d`'s run through the people from person `250·d` on, so
//! neighbouring domains share people, as the archives of the places a
//! person lived do: with 2,000 records a domain, each person is in two.

use serde_json::{json, Value};

use crate::local::keys::id_card_number;

const CATEGORIES: [(&str, &str); 4] = [
    ("WS", "文书"),
    ("KJ", "科技"),
    ("CW", "财务"),
    ("RS", "人事"),
];
const RETENTION: [&str; 3] = ["Y", "D30", "D10"];
const TOPICS: [&str; 8] = [
    "年度工作计划",
    "档案数字化项目",
    "安全生产检查",
    "人员招聘",
    "财务预算调整",
    "科研项目验收",
    "办公楼维修",
    "信息系统升级",
];
const KINDS: [&str; 6] = ["通知", "请示", "报告", "会议纪要", "批复", "函"];
const DEPARTMENTS: [&str; 5] = ["办公室", "档案馆", "财务处", "人事处", "科技处"];

const SURNAMES: [&str; 10] = ["王", "李", "张", "刘", "陈", "杨", "黄", "赵", "吴", "周"];
const GIVEN: [&str; 10] = ["伟", "芳", "娜", "敏", "静", "丽", "强", "磊", "军", "洋"];
/// Administrative divisions the sample people were registered in.
const REGIONS: [u32; 6] = [110101, 310104, 440305, 510107, 330106, 420102];

/// How many sample people there are.
pub const PEOPLE: u64 = 5_000;

/// Records per fonds before the next fonds number starts.
const PER_FONDS: u64 = 2_000;

/// Domain `domain` uses fonds `100·domain + 1 ..= 100·domain + 100`.
fn fonds(domain: usize, i: u64) -> u64 {
    domain as u64 * 100 + (i / PER_FONDS) % 100 + 1
}

/// The ID of sample record `i` of domain number `domain`: unique, as the
/// item number is `i` itself and fonds ranges do not overlap.
pub fn id(domain: usize, i: u64) -> String {
    let (category, _) = CATEGORIES[(i % 4) as usize];
    let year = 2000 + (i / 4) % 25;
    let retention = RETENTION[(i % 3) as usize];
    format!(
        "J{:03}-{category}·{year}-{retention}-{i:05}",
        fonds(domain, i)
    )
}

/// How many people further on each domain's personnel records start.
const PEOPLE_SHIFT: u64 = 250;

/// The person sample record `i` of domain `domain` is about, if it is a
/// personnel record.
pub fn person_of(domain: usize, i: u64) -> Option<u64> {
    (i % 4 == 3).then_some((i / 4 + PEOPLE_SHIFT * domain as u64) % PEOPLE)
}

/// The sample records of person `p` among the first `records` of domain
/// `domain`.
pub fn records_of(p: u64, domain: usize, records: u64) -> impl Iterator<Item = u64> {
    // The first personnel record j (record 4j + 3) about p.
    let first = (p + PEOPLE - PEOPLE_SHIFT * domain as u64 % PEOPLE) % PEOPLE;
    (first..)
        .step_by(usize::try_from(PEOPLE).expect("PEOPLE is 5 000"))
        .map(|j| 4 * j + 3)
        .take_while(move |&i| i < records)
}

/// The keys of sample person `p`: `id_card` and `name_birth`.
pub fn person_keys(p: u64) -> Value {
    let (year, month, day) = (
        1950 + (p % 50) as i32,
        1 + (p / 50 % 12) as u8,
        1 + (p % 28) as u8,
    );
    let name = format!(
        "{}{}{}",
        SURNAMES[(p % 10) as usize],
        GIVEN[(p / 10 % 10) as usize],
        GIVEN[(p / 100 % 10) as usize]
    );
    json!({
        "id_card": id_card_number(REGIONS[(p % 6) as usize], year, month, day, (p % 1000) as u16),
        "name_birth": format!("{name}|{year:04}-{month:02}-{day:02}"),
    })
}

/// The body (title, metadata, keys) of sample record `i` of domain `domain`.
pub fn body(domain: usize, i: u64) -> Value {
    let (_, category) = CATEGORIES[(i % 4) as usize];
    let topic = TOPICS[(i % 8) as usize];
    let kind = KINDS[(i / 8 % 6) as usize];
    let mut body = json!({
        "title": format!("关于{topic}的{kind}"),
        "metadata": {
            "fonds": format!("J{:03}", fonds(domain, i)),
            "category": category,
            "year": 2000 + (i / 4) % 25,
            "retention": RETENTION[(i % 3) as usize],
            "department": DEPARTMENTS[(i % 5) as usize],
            "pages": 1 + i % 40,
        }
    });
    if let Some(p) = person_of(domain, i) {
        body["title"] = json!(format!(
            "人事档案：{}",
            person_keys(p)["name_birth"]
                .as_str()
                .and_then(|s| s.split('|').next())
                .unwrap_or_default()
        ));
        body["keys"] = person_keys(p);
    }
    body
}

/// One NDJSON line for `_bulk`.
pub fn ndjson_line(domain: usize, i: u64) -> String {
    let mut v = body(domain, i);
    v["id"] = Value::String(id(domain, i));
    let mut line = v.to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_valid_and_unique_across_domains() {
        let mut seen = std::collections::HashSet::new();
        for domain in 0..3 {
            for i in 0..20_000 {
                let id = id(domain, i);
                crate::local::id::ArchiveId::parse(&id).unwrap();
                assert!(seen.insert(id));
            }
        }
        assert_eq!(id(0, 42), "J001-CW·2010-Y-00042");
    }

    #[test]
    fn personnel_records_carry_valid_keys_of_people_shared_by_neighbouring_domains() {
        let types = crate::local::keys::KeyTypes::new(crate::config::default_key_types()).unwrap();
        for p in 0..PEOPLE {
            let keys: std::collections::BTreeMap<String, String> =
                serde_json::from_value(person_keys(p)).unwrap();
            assert_eq!(types.normalise_all(&keys).unwrap(), keys, "person {p}");
        }
        assert_eq!(person_of(0, 3), Some(0));
        assert_eq!(person_of(0, 4 * PEOPLE + 3), Some(0));
        assert_eq!(person_of(0, 4), None);
        assert_eq!(person_of(1, 3), Some(250));
        assert_eq!(body(1, 3)["keys"], person_keys(250));
        // Person 300 is in domains 0 and 1 of 2,000 records each, not 2.
        let at = |d| records_of(300, d, 2_000).collect::<Vec<_>>();
        assert_eq!((at(0), at(1), at(2)), (vec![1_203], vec![203], vec![]));
        for d in 0..4 {
            for i in records_of(4_999, d, 50_000) {
                assert_eq!(person_of(d, i), Some(4_999));
            }
        }
    }
}
