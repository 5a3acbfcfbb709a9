CREATE TABLE category (
    category_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE supplier (
    supplier_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    country TEXT NOT NULL,
    rating REAL NOT NULL
);
CREATE TABLE product (
    product_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    category_id INTEGER NOT NULL REFERENCES category (category_id),
    supplier_id INTEGER NOT NULL REFERENCES supplier (supplier_id),
    price REAL NOT NULL,
    stock INTEGER NOT NULL,
    added_date TEXT NOT NULL
);
CREATE TABLE customer (
    customer_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    city TEXT NOT NULL,
    country TEXT NOT NULL,
    signup_date TEXT NOT NULL,
    loyalty_tier TEXT NOT NULL
);
CREATE TABLE orders (
    order_id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customer (customer_id),
    order_date TEXT NOT NULL,
    status TEXT NOT NULL,
    payment_method TEXT NOT NULL,
    shipping_cost REAL NOT NULL
);
CREATE TABLE order_item (
    order_id INTEGER NOT NULL REFERENCES orders (order_id),
    product_id INTEGER NOT NULL REFERENCES product (product_id),
    quantity INTEGER NOT NULL,
    unit_price REAL NOT NULL,
    PRIMARY KEY (order_id, product_id)
);
CREATE INDEX ix_product_category ON product (category_id);
CREATE INDEX ix_product_supplier ON product (supplier_id);
CREATE INDEX ix_orders_customer ON orders (customer_id);
CREATE INDEX ix_orders_date ON orders (order_date);
CREATE INDEX ix_order_item_product ON order_item (product_id);
