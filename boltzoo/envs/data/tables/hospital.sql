CREATE TABLE department (
    dept_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    floor INTEGER NOT NULL,
    phone_extension TEXT NOT NULL
);
CREATE TABLE doctor (
    doctor_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    dept_id INTEGER NOT NULL REFERENCES department (dept_id),
    specialty TEXT NOT NULL,
    hire_date TEXT NOT NULL,
    salary INTEGER NOT NULL
);
CREATE TABLE patient (
    patient_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    sex TEXT NOT NULL,
    birth_date TEXT NOT NULL,
    city TEXT NOT NULL,
    blood_type TEXT NOT NULL,
    insurer TEXT
);
CREATE TABLE appointment (
    appointment_id INTEGER PRIMARY KEY,
    patient_id INTEGER NOT NULL REFERENCES patient (patient_id),
    doctor_id INTEGER NOT NULL REFERENCES doctor (doctor_id),
    appointment_date TEXT NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL,
    fee REAL NOT NULL
);
CREATE TABLE medication (
    medication_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    drug_class TEXT NOT NULL,
    unit_cost REAL NOT NULL
);
CREATE TABLE prescription (
    prescription_id INTEGER PRIMARY KEY,
    appointment_id INTEGER NOT NULL REFERENCES appointment (appointment_id),
    medication_id INTEGER NOT NULL REFERENCES medication (medication_id),
    dose_mg INTEGER NOT NULL,
    days INTEGER NOT NULL
);
CREATE INDEX ix_doctor_dept ON doctor (dept_id);
CREATE INDEX ix_appointment_patient ON appointment (patient_id);
CREATE INDEX ix_appointment_doctor ON appointment (doctor_id);
CREATE INDEX ix_prescription_appointment ON prescription (appointment_id);
CREATE INDEX ix_prescription_medication ON prescription (medication_id);
