// An intrusive, allocation-free splay tree (Sleator and Tarjan's top-down splaying), chosen for the
// scheduler's local access patterns (docs/architecture.md#core). Elements embed a `SplayHook<Tag>`
// (derive from it; the Tag lets one type live in several trees) and are ordered by a strict-weak-order
// `Less`; keys must be unique under `Less` (break ties with an id or a sequence number).
//
// Guarantees:
//  - never allocates; the tree owns nothing; elements must outlive membership;
//  - insert, erase, min, pop_min, next: amortized O(log n); insert_after_max (appending past a known
//    largest element): O(1);
//  - not thread-safe (one owner thread).
//
//   struct Item : SplayHook<> { int key; };
//   struct ItemLess { bool operator()(const Item& a, const Item& b) const { return a.key < b.key; } };
//   SplayTree<Item, ItemLess> tree;  tree.insert(item);  Item* m = tree.min();  tree.erase(item);
#pragma once

#include <cstddef>
#include <type_traits>

#include "symphony/macros.hpp"

namespace symphony {

struct DefaultSplayTag {};

template <class Tag = DefaultSplayTag>
struct SplayHook {
  SplayHook* left = nullptr;
  SplayHook* right = nullptr;
};

template <class T, class Less, class Tag = DefaultSplayTag>
class SplayTree {
  using Hook = SplayHook<Tag>;
  static_assert(std::is_base_of_v<Hook, T>, "SplayTree<T>: T must derive from SplayHook<Tag>");

 public:
  SplayTree() = default;
  explicit SplayTree(Less less) : less_(less) {}
  SplayTree(const SplayTree&) = delete;
  SplayTree& operator=(const SplayTree&) = delete;

  bool empty() const noexcept { return root_ == nullptr; }
  std::size_t size() const noexcept { return size_; }

  // REQUIRES: x is not in any tree with this Tag.
  void insert(T& x) noexcept {
    Hook* n = &x;
    ++size_;
    if (!root_) {
      n->left = n->right = nullptr;
      root_ = n;
      return;
    }
    Hook* t = splay_to(root_, x);
    if (less_(x, elem(t))) {
      n->left = t->left;
      n->right = t;
      t->left = nullptr;
    } else {
      SYMPHONY_ASSERT(less_(elem(t), x));  // keys are unique
      n->right = t->right;
      n->left = t;
      t->right = nullptr;
    }
    root_ = n;
  }

  // Inserts x as the new largest element, as the right child of `last`,
  // without splaying: O(1), touching only x and last. (A leaf insert; the
  // amortized bounds hold as for insert.) REQUIRES: last is the largest
  // element of this tree, Less(last, x), and x is in no tree with this Tag.
  void insert_after_max(T& x, T& last) noexcept {
    Hook* n = &x;
    Hook* t = &last;
    SYMPHONY_ASSERT(!t->right && less_(last, x));
    n->left = n->right = nullptr;
    t->right = n;
    ++size_;
  }

  // REQUIRES: x is in this tree.
  void erase(T& x) noexcept {
    Hook* t = splay_to(root_, x);
    SYMPHONY_ASSERT(t == static_cast<Hook*>(&x));
    remove_root(t);
    t->left = t->right = nullptr;
  }

  // Returns the smallest element (splayed to the root), or nullptr.
  T* min() noexcept {
    if (!root_) return nullptr;
    if (root_->left) root_ = splay_extreme<true>(root_);
    return &elem(root_);
  }

  // Returns the largest element (splayed to the root), or nullptr.
  T* max() noexcept {
    if (!root_) return nullptr;
    if (root_->right) root_ = splay_extreme<false>(root_);
    return &elem(root_);
  }

  // Removes and returns the smallest element, or nullptr.
  T* pop_min() noexcept {
    T* m = min();
    if (m) {
      Hook* h = root_;
      root_ = h->right;
      --size_;
      h->left = h->right = nullptr;
    }
    return m;
  }

  // Returns the element after x in order, or nullptr. REQUIRES: x in tree.
  T* next(T& x) noexcept {
    Hook* t = splay_to(root_, x);
    SYMPHONY_ASSERT(t == static_cast<Hook*>(&x));
    root_ = t;
    if (!t->right) return nullptr;
    if (t->right->left) t->right = splay_extreme<true>(t->right);
    return &elem(t->right);
  }

  // Returns the element before x in order, or nullptr. REQUIRES: x in tree.
  T* prev(T& x) noexcept {
    Hook* t = splay_to(root_, x);
    SYMPHONY_ASSERT(t == static_cast<Hook*>(&x));
    root_ = t;
    if (!t->left) return nullptr;
    if (t->left->right) t->left = splay_extreme<false>(t->left);
    return &elem(t->left);
  }

  // Returns the smallest element not less than key, or nullptr. Key is
  // anything Less can compare against T in both directions.
  template <class Key>
  T* lower_bound(const Key& key) noexcept {
    T* best = nullptr;
    for (Hook* t = root_; t;) {
      if (less_(elem(t), key)) {
        t = t->right;
      } else {
        best = &elem(t);
        t = t->left;
      }
    }
    if (best) root_ = splay_to(root_, *best);
    return best;
  }

  // Unlinks every element without touching them (they become free to reuse).
  void clear() noexcept {
    root_ = nullptr;
    size_ = 0;
  }

  // Visits elements in order without restructuring (tests, debugging).
  template <class F>
  void for_each(F&& f) const {
    visit(root_, f);
  }

 private:
  static T& elem(Hook* h) noexcept { return *static_cast<T*>(h); }

  template <class F>
  static void visit(Hook* h, F& f) {
    if (!h) return;
    visit(h->left, f);
    f(static_cast<const T&>(elem(h)));
    visit(h->right, f);
  }

  void remove_root(Hook* t) noexcept {
    if (!t->left) {
      root_ = t->right;
    } else {
      Hook* l = splay_extreme<false>(t->left);  // max of left subtree: no right child
      l->right = t->right;
      root_ = l;
    }
    --size_;
  }

  // Top-down splay of the node equal to x (which must be present, or the last
  // node on its search path) to the root of the subtree t. Returns the new root.
  Hook* splay_to(Hook* t, const T& x) noexcept {
    Hook header;
    Hook* l = &header;
    Hook* r = &header;
    for (;;) {
      if (less_(x, elem(t))) {
        if (!t->left) break;
        if (less_(x, elem(t->left))) {  // zig-zig: rotate right
          Hook* y = t->left;
          t->left = y->right;
          y->right = t;
          t = y;
          if (!t->left) break;
        }
        r->left = t;  // link right
        r = t;
        t = t->left;
      } else if (less_(elem(t), x)) {
        if (!t->right) break;
        if (less_(elem(t->right), x)) {  // zig-zig: rotate left
          Hook* y = t->right;
          t->right = y->left;
          y->left = t;
          t = y;
          if (!t->right) break;
        }
        l->right = t;  // link left
        l = t;
        t = t->right;
      } else {
        break;
      }
    }
    l->right = t->left;
    r->left = t->right;
    t->left = header.right;
    t->right = header.left;
    return t;
  }

  // Splays the minimum (kLeft) or maximum of subtree t to its root.
  template <bool kLeft>
  static Hook* splay_extreme(Hook* t) noexcept {
    Hook header;
    Hook* l = &header;
    Hook* r = &header;
    for (;;) {
      if constexpr (kLeft) {
        if (!t->left) break;
        Hook* y = t->left;  // rotate right
        t->left = y->right;
        y->right = t;
        t = y;
        if (!t->left) break;
        r->left = t;
        r = t;
        t = t->left;
      } else {
        if (!t->right) break;
        Hook* y = t->right;  // rotate left
        t->right = y->left;
        y->left = t;
        t = y;
        if (!t->right) break;
        l->right = t;
        l = t;
        t = t->right;
      }
    }
    l->right = t->left;
    r->left = t->right;
    t->left = header.right;
    t->right = header.left;
    return t;
  }

  Hook* root_ = nullptr;
  std::size_t size_ = 0;
  [[no_unique_address]] Less less_{};
};

}  // namespace symphony
