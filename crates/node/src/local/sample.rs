//! Sample records with realistic archive numbers, for `xarchive up`,
//! `xarchive sample` and the benchmarks.
//!
//! Numbers follow the usual Chinese archival form: fonds (全宗号), category
//! (门类: WS 文书, KJ 科技, CW 财务, RS 人事), year, retention period (保管期限:
//! Y 永久, D30, D10) and item number, e.g. `J012-WS·2019-D30-00042`. Each
//! domain gets its own fonds, so the IDs of different domains never collide.
//!
//! Personnel records (人事) are about people, and carry their keys: a valid
//! resident identity number and name with birth date. The same people
//! appear in every domain (person `p` in record `4p + 3` of each, and every
//! `4 × PEOPLE` records after), so a search by key finds records in all.

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

/// The person a sample record is about, if it is a personnel record.
pub fn person_of(i: u64) -> Option<u64> {
    (i % 4 == 3).then_some((i / 4) % PEOPLE)
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
    if let Some(p) = person_of(i) {
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
    fn personnel_records_carry_valid_keys_of_people_found_in_every_domain() {
        let types = crate::local::keys::KeyTypes::new(crate::config::default_key_types()).unwrap();
        for p in 0..PEOPLE {
            let keys: std::collections::BTreeMap<String, String> =
                serde_json::from_value(person_keys(p)).unwrap();
            assert_eq!(types.normalise_all(&keys).unwrap(), keys, "person {p}");
        }
        assert_eq!(person_of(3), Some(0));
        assert_eq!(person_of(4 * PEOPLE + 3), Some(0));
        assert_eq!(person_of(4), None);
        assert_eq!(body(1, 3)["keys"], person_keys(0));
    }
}
