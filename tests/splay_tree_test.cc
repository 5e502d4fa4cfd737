#include "symphony/splay_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace symphony {
namespace {

struct Item : SplayHook<> {
  int key = 0;
  bool in_tree = false;
};
struct ItemLess {
  bool operator()(const Item& a, const Item& b) const { return a.key < b.key; }
  bool operator()(const Item& a, int k) const { return a.key < k; }
};

TEST(SplayTreeTest, KeepsOrderAndFindsMinMax) {
  std::vector<Item> items(10);
  SplayTree<Item, ItemLess> t;
  const int keys[] = {5, 3, 9, 1, 7, 0, 8, 2, 6, 4};
  for (int i = 0; i < 10; ++i) {
    items[i].key = keys[i];
    t.insert(items[i]);
  }
  EXPECT_EQ(t.size(), 10u);
  EXPECT_EQ(t.min()->key, 0);
  EXPECT_EQ(t.max()->key, 9);
  std::vector<int> seen;
  t.for_each([&](const Item& x) { seen.push_back(x.key); });
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // next() walks in order from the minimum.
  seen.clear();
  for (Item* x = t.min(); x; x = t.next(*x)) seen.push_back(x->key);
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  // prev() walks back from the maximum.
  seen.clear();
  for (Item* x = t.max(); x; x = t.prev(*x)) seen.push_back(x->key);
  EXPECT_EQ(seen, (std::vector<int>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(t.lower_bound(6)->key, 6);
  EXPECT_EQ(t.lower_bound(100), nullptr);
}

TEST(SplayTreeTest, PopMinDrainsInOrder) {
  std::vector<Item> items(100);
  SplayTree<Item, ItemLess> t;
  for (int i = 0; i < 100; ++i) {
    items[i].key = (i * 37) % 100;
    t.insert(items[i]);
  }
  for (int k = 0; k < 100; ++k) {
    Item* m = t.pop_min();
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->key, k);
  }
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.pop_min(), nullptr);
  EXPECT_EQ(t.min(), nullptr);
}

// Random inserts, erases, pops and lookups against std::set as the reference.
TEST(SplayTreeTest, MatchesStdSetUnderRandomOperations) {
  constexpr int kKeys = 512;
  std::vector<Item> items(kKeys);
  for (int i = 0; i < kKeys; ++i) items[i].key = i;
  SplayTree<Item, ItemLess> t;
  std::set<int> ref;
  std::mt19937 rng(7);
  int appends = 0;
  for (int step = 0; step < 200'000; ++step) {
    const int k = static_cast<int>(rng() % kKeys);
    switch (rng() % 5) {
      case 0:
        // Append a key just past the largest, below it, without splaying.
        if (!ref.empty() && *ref.rbegin() + 1 < kKeys) {
          const int last = *ref.rbegin();
          const int a = last + 1 + static_cast<int>(rng() % std::min(4, kKeys - 1 - last));
          t.insert_after_max(items[a], items[last]);
          items[a].in_tree = true;
          ref.insert(a);
          ++appends;
          break;
        }
        [[fallthrough]];
      case 1:
        if (!items[k].in_tree) {
          t.insert(items[k]);
          items[k].in_tree = true;
          ref.insert(k);
        }
        break;
      case 2: {
        // Half the time the largest, so that appends find room above it.
        const int e = rng() % 2 && !ref.empty() ? *ref.rbegin() : k;
        if (items[e].in_tree) {
          t.erase(items[e]);
          items[e].in_tree = false;
          ref.erase(e);
        }
        break;
      }
      case 3:
        if (Item* m = t.pop_min()) {
          ASSERT_EQ(m->key, *ref.begin());
          m->in_tree = false;
          ref.erase(ref.begin());
        } else {
          ASSERT_TRUE(ref.empty());
        }
        break;
      case 4: {
        Item* lb = t.lower_bound(k);
        auto it = ref.lower_bound(k);
        ASSERT_EQ(lb == nullptr, it == ref.end());
        if (lb) {
          ASSERT_EQ(lb->key, *it);
          Item* nx = t.next(*lb);
          auto jt = std::next(it);
          ASSERT_EQ(nx == nullptr, jt == ref.end());
          if (nx) {
            ASSERT_EQ(nx->key, *jt);
          }
        }
        break;
      }
    }
    ASSERT_EQ(t.size(), ref.size());
    if (!ref.empty()) {
      ASSERT_EQ(t.min()->key, *ref.begin());
    }
  }
  EXPECT_GT(appends, 10'000);
}

// One element can live in two trees at once through two hooks.
struct TagA {};
struct TagB {};
struct Dual : SplayHook<TagA>, SplayHook<TagB> {
  int a = 0, b = 0;
};
struct ByA {
  bool operator()(const Dual& x, const Dual& y) const { return x.a < y.a; }
};
struct ByB {
  bool operator()(const Dual& x, const Dual& y) const { return x.b < y.b; }
};

TEST(SplayTreeTest, TagsLetAnElementLiveInTwoTrees) {
  std::vector<Dual> d(5);
  SplayTree<Dual, ByA, TagA> ta;
  SplayTree<Dual, ByB, TagB> tb;
  for (int i = 0; i < 5; ++i) {
    d[i].a = i;
    d[i].b = 4 - i;
    ta.insert(d[i]);
    tb.insert(d[i]);
  }
  EXPECT_EQ(ta.min(), &d[0]);
  EXPECT_EQ(tb.min(), &d[4]);
  ta.erase(d[0]);
  EXPECT_EQ(ta.min(), &d[1]);
  EXPECT_EQ(tb.size(), 5u);
}

}  // namespace
}  // namespace symphony
